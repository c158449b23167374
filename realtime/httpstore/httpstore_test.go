package httpstore_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencehttp"
	"github.com/leasefence/lab/leasefence/fencetoken"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/httpstore"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

func newHTTPStore(t *testing.T, opts httpstore.HTTPOptions) *httpstore.HTTPStore {
	t.Helper()
	s, err := httpstore.NewHTTPStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		addrs := s.Addrs()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		assertClosed(t, addrs)
	})
	return s
}

// assertClosed fails for every address that still accepts a connection.
func assertClosed(t *testing.T, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Close", a)
		}
	}
}

// forgingOverlap is overlap at a tenth of its time on two resources, with
// one forger of each kind.
func forgingOverlap(t *testing.T, d time.Duration) spec.Scenario {
	sc := runtest.Short(t, "overlap", d, 0.1)
	sc.Resources = 2
	sc.Forgers = spec.CountForgers(len(spec.Forgeries))
	return sc
}

// Over real HTTP, the naive mode lands stale writes and every forger's
// write; the fenced mode refuses the stale ones at the gate and every
// forgery before or at it, and keeps its invariants. Each forgery is
// refused for what it is: 401 for what the coordinator never signed, 403
// for a genuine proof of another resource.
func TestHTTPForgersAndOverlap(t *testing.T) {
	t.Parallel()
	store := newHTTPStore(t, httpstore.HTTPOptions{})
	backend := realtime.NewMemory()
	backend.Prover = store.Signer()
	var refused []history.Event
	sub := history.SubscriberFunc(func(e history.Event) {
		if e.Kind == history.ForgeryRefused {
			refused = append(refused, e)
		}
	})
	res, file := runtest.RunRecorded(t, forgingOverlap(t, 30*time.Second), realtime.Options{Backend: backend, Store: store, Subscribers: []history.Subscriber{sub}})
	runtest.AssertInvariants(t, res)
	runtest.CheckRoundTrip(t, res, file)
	n, f := res.Modes[history.Naive], res.Modes[history.Fenced]
	if n.StaleWritesLanded == 0 || f.CommitsRefused == 0 {
		t.Errorf("naive landed %d stale writes, fenced refused %d: want both > 0", n.StaleWritesLanded, f.CommitsRefused)
	}
	if n.ForgeriesLanded == 0 || n.ForgeriesRefused != 0 {
		t.Errorf("naive: %d forgeries landed, %d refused: want some landed, none refused", n.ForgeriesLanded, n.ForgeriesRefused)
	}
	if f.ForgeriesLanded != 0 || f.ForgedFloorsMoved != 0 || f.ForgeriesRefused < len(spec.Forgeries) {
		t.Errorf("fenced: %d forgeries landed, %d floors moved, %d refused", f.ForgeriesLanded, f.ForgedFloorsMoved, f.ForgeriesRefused)
	}
	want := map[history.Outcome]string{"own_key": "401", "tampered": "401", "alg_none": "401", "replayed": "403"}
	seen := map[history.Outcome]bool{}
	for _, e := range refused {
		if e.Mode != history.Fenced {
			continue
		}
		seen[e.Outcome] = true
		if !strings.Contains(e.Detail, want[e.Outcome]) {
			t.Errorf("%s refused with %q, want %s", e.Outcome, e.Detail, want[e.Outcome])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("refused forgeries of kinds %v, want all of %v", seen, want)
	}
	if got := store.Verifier().Refused(); got == 0 {
		t.Error("the servers' verifier refused no proof")
	}
	if res.Store != "http" {
		t.Errorf("store %q, want http", res.Store)
	}
}

// unverified is a deliberately broken check: it reads the claims of the
// proof without verifying it, as a service that trusts its callers would.
func unverified(*fencetoken.Verifier) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			parts := strings.Split(r.Header.Get(fencehttp.Header), ".")
			var c struct {
				Sub, Res, Fence string
			}
			if len(parts) == 3 {
				if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
					var m map[string]any
					json.Unmarshal(b, &m)
					c.Sub, _ = m["sub"].(string)
					c.Res, _ = m["lf_res"].(string)
					c.Fence, _ = m["lf_fence"].(string)
				}
			}
			fence, _ := strconv.ParseUint(c.Fence, 10, 64)
			tok := leasefence.Token{Holder: c.Sub, Resource: c.Res, Fence: leasefence.Fence(fence)}
			next.ServeHTTP(w, r.WithContext(fencetoken.ContextWithToken(r.Context(), tok)))
		})
	}
}

// A server that skips verification lets a forger in: the checker, which
// reads only the resource's record, reports it.
func TestUnverifiedServerIsCaught(t *testing.T) {
	t.Parallel()
	store := newHTTPStore(t, httpstore.HTTPOptions{Check: unverified})
	backend := realtime.NewMemory()
	backend.Prover = store.Signer()
	sc := forgingOverlap(t, 10*time.Second)
	sc.Forgers = []spec.Forgery{spec.ForgeAlgNone}
	res, _ := runtest.RunRecorded(t, sc, realtime.Options{Backend: backend, Store: store, Modes: []history.Mode{history.Fenced}})
	f := res.Modes[history.Fenced]
	if f.ForgeriesLanded == 0 || f.ForgedFloorsMoved == 0 {
		t.Fatalf("%d forgeries landed, %d floors moved: want both > 0", f.ForgeriesLanded, f.ForgedFloorsMoved)
	}
	v := strings.Join(f.Violations, "; ")
	if !strings.Contains(v, "forged write") || !strings.Contains(v, "moved by a forger") {
		t.Errorf("violations %q, want the forged writes and the floor moved", v)
	}
}

// A write slow on the wire is the check-to-write gap with no stall at
// all: a holder that does not renew loses its lease while its write is on
// the way, so naive writes land stale and the fenced gate refuses them.
func TestWriteDelayOnTheWire(t *testing.T) {
	t.Parallel()
	sc := runtest.Short(t, "overlap", 30*time.Second, 0.1)
	sc.Agent.Stall, sc.Agent.RenewAt = spec.Dist{}, 0
	sc.Network.WriteDelay = spec.Dist{TailP: 0.25, TailMin: 120 * time.Millisecond, TailMax: 250 * time.Millisecond} // TTL 100ms
	store := newHTTPStore(t, httpstore.HTTPOptions{})
	backend := realtime.NewMemory()
	backend.Prover = store.Signer()
	res, _ := runtest.RunRecorded(t, sc, realtime.Options{Backend: backend, Store: store})
	runtest.AssertInvariants(t, res)
	if n, f := res.Modes[history.Naive], res.Modes[history.Fenced]; n.StaleWritesLanded == 0 || f.CommitsRefused == 0 {
		t.Errorf("naive landed %d stale writes, fenced refused %d: want both > 0", n.StaleWritesLanded, f.CommitsRefused)
	}
}

// Forgers and a write delay need a resource across a network; the other
// stores refuse them before anything starts.
func TestOverTheWireNeedsHTTP(t *testing.T) {
	sc := forgingOverlap(t, time.Second)
	if _, err := realtime.New(sc, realtime.Options{}); !errors.Is(err, spec.ErrOverTheWire) {
		t.Errorf("New on the memory store: %v, want ErrOverTheWire", err)
	}
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{}); !errors.Is(err, spec.ErrOverTheWire) {
		t.Errorf("the simulator: %v, want ErrOverTheWire", err)
	}
	err := realtime.Config{Backend: registry.Memory, Resource: registry.SQLite}.Check(sc)
	if err == nil || !strings.Contains(err.Error(), "--resource http") {
		t.Errorf("Check: %v, want a refusal naming --resource http", err)
	}
	if err := (realtime.Config{Backend: registry.Memory, Resource: registry.HTTP}).Check(sc); err != nil {
		t.Errorf("Check on http: %v", err)
	}
}

// Setup opens the servers and the signing coordinator together, and
// Close ends every server: no port is left open after the run.
func TestHTTPSetupEndsItsServers(t *testing.T) {
	t.Parallel()
	sc := runtest.Short(t, "overlap", 3*time.Second, 0.1)
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Memory, Resource: registry.HTTP}, sc)
	if err != nil {
		t.Fatal(err)
	}
	store := s.Store.(*httpstore.HTTPStore)
	res, err := s.Run(t.Context(), realtime.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addrs := store.Addrs()
	if len(addrs) != 2 { // one resource, two modes
		t.Errorf("servers at %v, want 2", addrs)
	}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("server at %s, want loopback", a)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	assertClosed(t, addrs)
	if f := res.Modes[history.Fenced]; f.CommitsAdmitted == 0 {
		t.Error("no write landed over HTTP")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := store.Resource(ctx, history.Fenced, "late", nil); err == nil {
		t.Error("a closed store started a server")
	}
}

// Every built-in scenario over real HTTP, at a tenth of its time: the
// coordinator's restarts keep signing, pushes reach the servers' gates,
// and the fenced mode keeps its invariants.
func TestBuiltinsOnHTTP(t *testing.T) {
	t.Parallel()
	for _, name := range spec.BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := runtest.Short(t, name, 12*time.Second, 0.1)
			store := newHTTPStore(t, httpstore.HTTPOptions{})
			backend := realtime.NewMemory()
			backend.Prover = store.Signer()
			res, file := runtest.RunRecorded(t, sc, realtime.Options{Backend: backend, Store: store})
			runtest.AssertInvariants(t, res)
			runtest.CheckRoundTrip(t, res, file)
			// Every write reaches the servers, unless every fenced check
			// failed first (renewal: the client dates the lease from the
			// send, so both holders find it over before they write).
			if f := res.Modes[history.Fenced]; f.CommitsAdmitted == 0 && f.ChecksFailed == 0 {
				t.Errorf("no write landed over HTTP")
			}
			if n := store.Verifier().Refused(); n != 0 {
				t.Errorf("the servers refused %d honest proofs", n)
			}
		})
	}
}
