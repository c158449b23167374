package fencehttp_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencehttp"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

const issuer = "coordinators.test"

// world is a signing key, a resource server with Require in front of a
// FenceGate, and counters that prove what reached the handler.
type world struct {
	pub      ed25519.PublicKey
	signer   *fencetoken.Signer
	verifier *fencetoken.Verifier
	gate     *leasefence.FenceGate
	srv      *httptest.Server
	client   *http.Client
	calls    atomic.Int64 // handler invocations
	writes   atomic.Int64 // admitted writes
	refused  chan fencehttp.RefusedInfo
	errs     chan error // the gate's refusals, as the server saw them
}

func newWorld(t testing.TB, opts ...fencetoken.Option) *world {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{pub: pub, gate: leasefence.NewFenceGate("deploy/prod"), refused: make(chan fencehttp.RefusedInfo, 100), errs: make(chan error, 100)}
	if w.signer, err = fencetoken.NewSigner(priv, "k1", issuer); err != nil {
		t.Fatal(err)
	}
	if w.verifier, err = fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"k1": pub}, opts...); err != nil {
		t.Fatal(err)
	}
	require := fencehttp.RequireWith(w.verifier, fencehttp.Options{Refused: func(i fencehttp.RefusedInfo) {
		select {
		case w.refused <- i:
		default:
		}
	}})
	w.srv = httptest.NewServer(require(http.HandlerFunc(w.write)))
	t.Cleanup(w.srv.Close)
	w.client = &http.Client{Transport: fencehttp.Transport{Base: w.srv.Client().Transport}}
	return w
}

// write is the resource's handler: it commits the request body through the
// gate under the verified token.
func (w *world) write(rw http.ResponseWriter, r *http.Request) {
	w.calls.Add(1)
	tok, ok := fencehttp.Token(r.Context())
	if !ok {
		http.Error(rw, "no token", http.StatusInternalServerError)
		return
	}
	err := w.gate.Commit(r.Context(), tok, func(context.Context) error {
		w.writes.Add(1)
		return nil
	})
	switch {
	case err == nil:
		rw.WriteHeader(http.StatusNoContent)
	case fencehttp.WriteError(rw, err):
		select {
		case w.errs <- err:
		default: // a test that does not read them
		}
	case errors.Is(err, leasefence.ErrWrongResource):
		http.Error(rw, err.Error(), http.StatusForbidden)
	default:
		http.Error(rw, err.Error(), http.StatusInternalServerError)
	}
}

func (w *world) lease(t testing.TB, holder string, fence leasefence.Fence) leasefence.Lease {
	t.Helper()
	tok := leasefence.Token{Resource: "deploy/prod", Holder: holder, Fence: fence}
	proof, err := w.signer.Prove(tok)
	if err != nil {
		t.Fatal(err)
	}
	return leasefence.Lease{Token: tok, Proof: proof}
}

func (w *world) post(t testing.TB, ctx context.Context) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.srv.URL+"/write", strings.NewReader("v"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// postRaw sends the request with the given Fence-Token headers, past the
// Transport, as a forger would.
func (w *world) postRaw(t *testing.T, proofs ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, w.srv.URL+"/write", strings.NewReader("v"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range proofs {
		req.Header.Add(fencehttp.Header, p)
	}
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestGenuineProofWrites(t *testing.T) {
	w := newWorld(t)
	resp := w.post(t, fencehttp.WithLease(t.Context(), w.lease(t, "agent-a", 7)))
	if resp.StatusCode != http.StatusNoContent || w.writes.Load() != 1 {
		t.Fatalf("status %d, %d writes", resp.StatusCode, w.writes.Load())
	}
	if f := w.gate.Floor(); f.Holder != "agent-a" || f.Fence != 7 {
		t.Fatalf("floor %v", f)
	}
	if err := fencehttp.Refusal(resp); err != nil {
		t.Fatalf("Refusal of a 204 = %v", err)
	}
}

// Every request Require refuses: the status, a problem body, the handler
// never called, the gate untouched, and each failed verification counted.
func TestRequireRefuses(t *testing.T) {
	_, forgerKey, _ := ed25519.GenerateKey(rand.Reader)
	forger, _ := fencetoken.NewSigner(forgerKey, "k1", issuer)
	seed := newWorld(t)
	genuine := seed.lease(t, "agent-a", 7).Proof
	parts := strings.Split(genuine, ".")
	forged, _ := forger.Prove(leasefence.Token{Resource: "deploy/prod", Holder: "mallory", Fence: 1 << 62})
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+issuer+`","sub":"mallory","lf_res":"deploy/prod","lf_fence":"99999"}`)) + "."
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+issuer+`","sub":"agent-a","lf_res":"deploy/prod","lf_fence":"99999"}`)) + "." + parts[2]
	for _, tc := range []struct {
		name     string
		headers  []string
		status   int
		verified bool // counted by Verifier.Refused
	}{
		{"no header", nil, http.StatusPreconditionRequired, false},
		{"empty header", []string{""}, http.StatusPreconditionRequired, false},
		{"forger's own key", []string{forged}, http.StatusUnauthorized, true},
		{"alg none", []string{none}, http.StatusUnauthorized, true},
		{"tampered claim", []string{tampered}, http.StatusUnauthorized, true},
		{"garbage", []string{"Bearer xyz"}, http.StatusUnauthorized, true},
		{"two proofs", []string{genuine, forged}, http.StatusUnauthorized, true},
		{"the genuine proof twice", []string{genuine, genuine}, http.StatusUnauthorized, true},
		{"two empty headers", []string{"", ""}, http.StatusUnauthorized, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.gate.Admit(leasefence.Token{Resource: "deploy/prod", Holder: "agent-a", Fence: 5})
			before := w.gate.Floor()
			resp := w.postRaw(t, tc.headers...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != fencehttp.ProblemContentType {
				t.Fatalf("Content-Type %q", ct)
			}
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body["status"] != float64(tc.status) || body["type"] == "" {
				t.Fatalf("problem body %v, %v", body, err)
			}
			if n := w.calls.Load(); n != 0 {
				t.Fatalf("the handler ran %d times", n)
			}
			if w.gate.Floor() != before || w.gate.RejectionCount() != 0 {
				t.Fatalf("gate touched: floor %v, %d rejections", w.gate.Floor(), w.gate.RejectionCount())
			}
			if got, want := w.verifier.Refused(), map[bool]uint64{true: 1, false: 0}[tc.verified]; got != want {
				t.Fatalf("Verifier.Refused = %d, want %d", got, want)
			}
			select {
			case info := <-w.refused:
				if info.Status != tc.status || info.Err == nil {
					t.Fatalf("Refused hook got %+v", info)
				}
				if tc.verified && !errors.Is(info.Err, fencetoken.ErrInvalid) {
					t.Fatalf("hook error %v does not wrap ErrInvalid", info.Err)
				}
				if !tc.verified && !errors.Is(info.Err, fencehttp.ErrMissingProof) {
					t.Fatalf("hook error %v does not wrap ErrMissingProof", info.Err)
				}
			default:
				t.Fatal("the Refused hook was not called")
			}
			if fencehttp.Refusal(resp) != nil {
				t.Fatal("Refusal turned a 428/401 into a gate refusal")
			}
		})
	}
}

// A genuine proof for another resource verifies, the gate refuses it with
// ErrWrongResource (not logged, floor untouched), and WriteError leaves
// the answer to the handler.
func TestProofForAnotherResource(t *testing.T) {
	w := newWorld(t)
	tok := leasefence.Token{Resource: "tickets", Holder: "agent-a", Fence: 99}
	proof, _ := w.signer.Prove(tok)
	resp := w.post(t, fencehttp.WithLease(t.Context(), leasefence.Lease{Token: tok, Proof: proof}))
	if resp.StatusCode != http.StatusForbidden || w.calls.Load() != 1 || w.writes.Load() != 0 {
		t.Fatalf("status %d, %d calls, %d writes", resp.StatusCode, w.calls.Load(), w.writes.Load())
	}
	if w.gate.Floor() != (leasefence.Token{}) || w.gate.RejectionCount() != 0 {
		t.Fatalf("gate touched: %v", w.gate.Floor())
	}
}

// A stale holder's write comes back as the *StaleFenceError the server's
// gate returned, field for field; the body stays readable.
func TestStaleRefusalAcrossTheWire(t *testing.T) {
	w := newWorld(t)
	if r := w.post(t, fencehttp.WithLease(t.Context(), w.lease(t, "agent-b", 9))); r.StatusCode != http.StatusNoContent {
		t.Fatalf("newer holder: %d", r.StatusCode)
	}
	resp := w.post(t, fencehttp.WithLease(t.Context(), w.lease(t, "agent-a", 7)))
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("stale holder: %d", resp.StatusCode)
	}
	err := fencehttp.Refusal(resp)
	var stale *leasefence.StaleFenceError
	if !errors.As(err, &stale) || !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("Refusal = %v, want a *StaleFenceError", err)
	}
	server := <-w.errs
	var want *leasefence.StaleFenceError
	if !errors.As(server, &want) || *stale != *want || stale.Seq != 1 || stale.FloorHolder != "agent-b" || stale.FloorFence != 9 {
		t.Fatalf("client got %+v, the server's gate returned %+v", stale, want)
	}
	body, _ := io.ReadAll(resp.Body)
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body not readable after Refusal: %q, %v", body, err)
	}
	for k, v := range map[string]any{
		"type": fencehttp.TypeStaleFence, "status": float64(409), "resource": "deploy/prod", "holder": "agent-a",
		"fence": "7", "floor_holder": "agent-b", "floor_fence": "9", "seq": "1",
	} {
		if p[k] != v {
			t.Errorf("problem member %s = %#v, want %#v", k, p[k], v)
		}
	}
	if w.writes.Load() != 1 {
		t.Fatalf("%d writes landed, want only the newer holder's", w.writes.Load())
	}
}

// The floor's fence under another holder (a coordinator restarted without
// its counter) comes back matching ErrTokenConflict.
func TestTokenConflictAcrossTheWire(t *testing.T) {
	w := newWorld(t)
	w.post(t, fencehttp.WithLease(t.Context(), w.lease(t, "agent-b", 9)))
	resp := w.post(t, fencehttp.WithLease(t.Context(), w.lease(t, "agent-a", 9)))
	err := fencehttp.Refusal(resp)
	var conflict *leasefence.TokenConflictError
	if !errors.Is(err, leasefence.ErrTokenConflict) || !errors.As(err, &conflict) || conflict.FloorHolder != "agent-b" {
		t.Fatalf("Refusal = %v, want a token conflict", err)
	}
}

func TestRefusalIgnoresOtherResponses(t *testing.T) {
	for name, resp := range map[string]*http.Response{
		"nil":               nil,
		"200":               response(200, fencehttp.ProblemContentType, `{"type":"urn:leasefence:stale-fence"}`),
		"409 plain text":    response(409, "text/plain", "conflict"),
		"409 other problem": response(409, fencehttp.ProblemContentType, `{"type":"urn:example:out-of-stock","status":409}`),
		"409 fence number":  response(409, fencehttp.ProblemContentType, `{"type":"urn:leasefence:stale-fence","resource":"r","holder":"a","fence":7,"floor_holder":"b","floor_fence":"9","seq":"1"}`),
		"409 not JSON":      response(409, fencehttp.ProblemContentType, `{`),
		"409 too large":     response(409, fencehttp.ProblemContentType, `{"detail":"`+strings.Repeat("x", 70<<10)+`"}`),
	} {
		var before string
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			before = string(b)
			resp.Body = io.NopCloser(strings.NewReader(before))
		}
		if err := fencehttp.Refusal(resp); err != nil {
			t.Errorf("%s: Refusal = %v, want nil", name, err)
		}
		if resp != nil {
			if after, _ := io.ReadAll(resp.Body); string(after) != before {
				t.Errorf("%s: body changed by Refusal", name)
			}
		}
	}
}

func response(status int, contentType, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(strings.NewReader(body))}
}

func TestWriteErrorOnlyForRefusals(t *testing.T) {
	for _, err := range []error{
		nil,
		errors.New("disk full"),
		fmt.Errorf("commit: %w", leasefence.ErrWrongResource),
		leasefence.ErrStaleFence, // the sentinel alone names no holders
	} {
		rec := httptest.NewRecorder()
		if fencehttp.WriteError(rec, err) {
			t.Errorf("WriteError(%v) = true", err)
		}
		if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
			t.Errorf("WriteError(%v) wrote %q %v", err, rec.Body, rec.Header())
		}
	}
	r := leasefence.Rejection{Seq: 1 << 60, Resource: "r", Holder: "a", Fence: ^leasefence.Fence(0) - 1, FloorHolder: "b", FloorFence: ^leasefence.Fence(0)}
	rec := httptest.NewRecorder()
	if !fencehttp.WriteError(rec, fmt.Errorf("deploy: %w", leasefence.RejectionError(r))) || rec.Code != http.StatusConflict {
		t.Fatalf("a wrapped refusal: code %d", rec.Code)
	}
	err := fencehttp.Refusal(rec.Result())
	var stale *leasefence.StaleFenceError
	if !errors.As(err, &stale) || stale.Rejection != r {
		t.Fatalf("round trip of the largest numbers: %+v, want %+v", err, r)
	}
}

func TestTransport(t *testing.T) {
	var seen []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.Header.Get(fencehttp.Header))
		return response(204, "", ""), nil
	})
	tr := fencehttp.Transport{Base: base}
	req := httptest.NewRequestWithContext(fencehttp.WithLease(t.Context(), leasefence.Lease{Proof: "p.q.r"}), http.MethodGet, "http://x/", nil)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get(fencehttp.Header) != "" {
		t.Fatal("Transport changed the caller's request")
	}
	plain := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://x/", nil)
	if _, err := tr.RoundTrip(plain); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != "p.q.r" || seen[1] != "" {
		t.Fatalf("headers sent: %q", seen)
	}
	unproved := httptest.NewRequestWithContext(fencehttp.WithLease(t.Context(), leasefence.Lease{Token: leasefence.Token{Resource: "r", Holder: "a", Fence: 1}}), http.MethodGet, "http://x/", nil)
	if _, err := tr.RoundTrip(unproved); !errors.Is(err, fencehttp.ErrNoProof) {
		t.Fatalf("a lease without a proof: %v", err)
	}
}

// http.Client.CloseIdleConnections reaches the base transport.
func TestTransportClosesIdleConnections(t *testing.T) {
	base := &closeCounter{}
	(&http.Client{Transport: fencehttp.Transport{Base: base}}).CloseIdleConnections()
	if base.closed != 1 {
		t.Fatalf("base closed %d times", base.closed)
	}
}

type closeCounter struct {
	http.RoundTripper
	closed int
}

func (c *closeCounter) CloseIdleConnections() { c.closed++ }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Holders with fences 1..n write at once, each many times, through one
// verifier and its cache: every answer is a write or a refusal that
// round-trips, and the floor ends at the highest fence.
func TestConcurrentRequests(t *testing.T) {
	w := newWorld(t, fencetoken.WithCacheSize(4))
	const holders, each = 8, 20
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for h := range holders {
		lease := w.lease(t, fmt.Sprintf("agent-%d", h), leasefence.Fence(h+1))
		wg.Go(func() {
			ctx := fencehttp.WithLease(context.Background(), lease)
			for range each {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.srv.URL, strings.NewReader("v"))
				resp, err := w.client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				switch err := fencehttp.Refusal(resp); {
				case resp.StatusCode == http.StatusNoContent:
					admitted.Add(1)
				case errors.Is(err, leasefence.ErrStaleFence):
					refused.Add(1)
				default:
					t.Errorf("status %d, refusal %v", resp.StatusCode, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if admitted.Load()+refused.Load() != holders*each || admitted.Load() != w.writes.Load() {
		t.Fatalf("%d admitted + %d refused of %d; %d writes", admitted.Load(), refused.Load(), holders*each, w.writes.Load())
	}
	if f := w.gate.Floor(); f.Fence != holders {
		t.Fatalf("floor %v, want fence %d", f, holders)
	}
	if w.verifier.Refused() != 0 {
		t.Fatalf("genuine proofs refused: %d", w.verifier.Refused())
	}
}

// The wire format of a refusal, byte for byte: what a client in any
// language parses (the README shows this body).
func TestProblemBody(t *testing.T) {
	rec := httptest.NewRecorder()
	fencehttp.WriteError(rec, leasefence.RejectionError(leasefence.Rejection{
		Seq: 1, Resource: "deploy/prod", Holder: "agent-a", Fence: 1, FloorHolder: "agent-b", FloorFence: 2,
	}))
	want := `{"type":"urn:leasefence:stale-fence","title":"Stale fence","status":409,` +
		`"detail":"leasefence: stale fence at \"deploy/prod\": agent-a@1 refused, floor is agent-b@2",` +
		`"resource":"deploy/prod","holder":"agent-a","fence":"1","floor_holder":"agent-b","floor_fence":"2","seq":"1"}`
	if rec.Code != http.StatusConflict || rec.Header().Get("Content-Type") != "application/problem+json" || rec.Body.String() != want {
		t.Fatalf("%d %q\n%s\nwant\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
	}
}
