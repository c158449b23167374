package httpstore

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencehttp"
	"github.com/leasefence/lab/leasefence/fencetoken"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// HTTPStore keeps each resource behind a real HTTP server of its own, on
// a loopback port (127.0.0.1, a port the system picks): the service an
// agent writes to across a network. Each server has an in-memory
// leasefence.FenceGate behind fencehttp.Require, and keeps its record of
// landings under the gate's lock, as MemoryStore does; the writes come in
// as real HTTP requests, each carrying the proof of the writer's lease
// (fencehttp.Transport stamps it from the request's context, see
// fencehttp.WithLease). The gate is in memory because the network is what
// this store adds: the gate behind it is the one MemoryStore exercises,
// and sqlgate has --resource sqlite.
//
// Every server verifies proofs with the public half of a key generated
// for the store; the coordinator signs with Signer (give it to the
// backend as its Prover). The coordinator's push (Admit) and the reading
// back of the record (Landings, Floor) are the service's own, in process:
// they are not the agents' wire. Close stops every server and closes its
// port.
type HTTPStore struct {
	signer   *fencetoken.Signer
	forger   *fencetoken.Signer // the forgers' own key (Forge)
	verifier *fencetoken.Verifier
	check    func(http.Handler) http.Handler
	client   *http.Client
	base     *http.Transport

	mu      sync.Mutex
	servers []*httpServer
	closed  bool
}

// HTTPOptions configures an HTTPStore.
type HTTPOptions struct {
	// Check builds what each server runs in front of its handler of
	// fenced writes, from the store's verifier; nil is fencehttp.Require.
	// It is how a test puts a server that skips verification in place.
	Check func(v *fencetoken.Verifier) func(http.Handler) http.Handler
}

// NewHTTPStore makes an HTTP store with a fresh Ed25519 key.
func NewHTTPStore(opts HTTPOptions) (*HTTPStore, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("realtime: http store: %w", err)
	}
	signer, err := fencetoken.NewSigner(priv, keyID, issuer)
	if err != nil {
		return nil, fmt.Errorf("realtime: http store: %w", err)
	}
	verifier, err := fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{keyID: pub})
	if err != nil {
		return nil, fmt.Errorf("realtime: http store: %w", err)
	}
	forger, err := forgerKey()
	if err != nil {
		return nil, fmt.Errorf("realtime: http store: %w", err)
	}
	check := fencehttp.Require
	if opts.Check != nil {
		check = opts.Check
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 64
	s := &HTTPStore{signer: signer, forger: forger, verifier: verifier, check: check(verifier), base: base}
	s.client = &http.Client{Transport: fencehttp.Transport{Base: wireDelay{base: base}}}
	return s, nil
}

// Signer is the coordinator's Prover: it signs every grant's proof.
func (s *HTTPStore) Signer() *fencetoken.Signer { return s.signer }

// Prover implements realtime.ProvingStore: the store's Signer.
func (s *HTTPStore) Prover() leasefence.Prover { return s.signer }

// Verifier is the servers' verifier; its Refused counts the proofs they
// turned away.
func (s *HTTPStore) Verifier() *fencetoken.Verifier { return s.verifier }

// Name implements realtime.Store.
func (*HTTPStore) Name() string { return registry.HTTP }

// Addrs lists the servers' addresses (host:port), in the order they
// started.
func (s *HTTPStore) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.servers))
	for i, srv := range s.servers {
		out[i] = srv.addr
	}
	return out
}

// Resource implements realtime.Store: it starts the resource's server.
func (s *HTTPStore) Resource(_ context.Context, _ history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("realtime: http store is closed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("realtime: http store: %w", err)
	}
	res := &httpResource{MemoryResource: realtime.NewMemoryResource(name, now), client: s.client,
		url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.Handle("POST /commit", s.check(http.HandlerFunc(res.serveCommit)))
	mux.HandleFunc("POST /write", res.serveWrite)
	srv := &httpServer{addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}, done: make(chan struct{})}
	go func() {
		defer close(srv.done)
		srv.srv.Serve(ln) // returns http.ErrServerClosed once Close runs
	}()
	s.servers = append(s.servers, srv)
	return res, nil
}

// Close implements realtime.Store: it stops every server, closing its port and
// its connections, and waits for each to end. It is safe to call more
// than once.
func (s *HTTPStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.srv.Close())
		<-srv.done
	}
	s.base.CloseIdleConnections()
	return errors.Join(errs...)
}

type httpServer struct {
	addr string
	srv  *http.Server
	done chan struct{}
}

// httpResource is one resource of an HTTPStore: the client's side calls
// its server over HTTP; the server's side is the gate and the record
// (realtime.MemoryResource), which Landings, Admit and Floor read in process.
type httpResource struct {
	*realtime.MemoryResource
	client *http.Client
	url    string
}

// Commit sends the write to the server's gate, under the proof of the
// lease in ctx (realtime.WithLease): the gate judges the token the proof
// carries, not t. A refusal comes back as the gate's own error
// (fencehttp.Refusal).
func (r *httpResource) Commit(ctx context.Context, _ leasefence.Token, id uint64) error {
	return r.post(ctx, "/commit", id)
}

// Write sends the write past every gate (naive mode).
func (r *httpResource) Write(ctx context.Context, _ leasefence.Token, id uint64) error {
	return r.post(ctx, "/write", id)
}

// post sends write id to path, the proof of the lease in ctx
// (realtime.WithLease) in its header (fencehttp.Transport).
func (r *httpResource) post(ctx context.Context, path string, id uint64) error {
	if l, ok := realtime.WriteLease(ctx); ok {
		ctx = fencehttp.WithLease(ctx, l)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+path+"?id="+strconv.FormatUint(id, 10), nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := fencehttp.Refusal(resp); err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return &statusError{Status: resp.StatusCode, Message: strings.TrimSpace(string(body))}
}

func writeID(w http.ResponseWriter, req *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(req.URL.Query().Get("id"), 10, 64)
	if err != nil {
		http.Error(w, "id: "+err.Error(), http.StatusBadRequest)
		return 0, false
	}
	return id, true
}

// serveCommit commits a write under the token the check in front of it
// verified, recording it under the gate's lock.
func (r *httpResource) serveCommit(w http.ResponseWriter, req *http.Request) {
	id, ok := writeID(w, req)
	if !ok {
		return
	}
	tok, ok := fencehttp.Token(req.Context())
	if !ok {
		http.Error(w, "no verified token", http.StatusInternalServerError)
		return
	}
	err := r.MemoryResource.Commit(req.Context(), tok, id)
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case fencehttp.WriteError(w, err): // 409, problem+json
	case errors.Is(err, leasefence.ErrWrongResource):
		http.Error(w, err.Error(), http.StatusForbidden)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// serveWrite lands a write with no check at all: naive mode.
func (r *httpResource) serveWrite(w http.ResponseWriter, req *http.Request) {
	id, ok := writeID(w, req)
	if !ok {
		return
	}
	r.MemoryResource.Write(req.Context(), leasefence.Token{}, id) // never fails
	w.WriteHeader(http.StatusNoContent)
}

// wireDelay is the fault layer on the wire to a resource: it holds each
// request the delay its context carries (realtime.WithWireDelay) before sending it,
// as a slow network would, after the writer's check passed.
type wireDelay struct{ base http.RoundTripper }

func (t wireDelay) RoundTrip(req *http.Request) (*http.Response, error) {
	if d, ok := realtime.WireDelay(req.Context()); ok {
		if err := realtime.Sleep(req.Context(), d); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	return t.base.RoundTrip(req)
}

func (t wireDelay) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// readHeaderTimeout bounds a request's headers, as the runner bounds a
// write.
const readHeaderTimeout = 10 * time.Second

func init() {
	registry.SetOpener(registry.Stores, registry.HTTP, realtime.StoreOpener(func(*realtime.Setup) (realtime.Store, error) {
		return NewHTTPStore(HTTPOptions{})
	}))
}
