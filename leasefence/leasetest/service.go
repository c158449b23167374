package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Harness is one Service under test, as TestService's factory makes it.
type Harness struct {
	// Service is the implementation under test. Each call of the factory
	// returns one that shares no leases with any other (a fresh coordinator,
	// or a fresh key prefix).
	Service leasefence.Service
	// TTL is the lease duration the service grants.
	TTL time.Duration
	// Elapse lets d pass for the service: advance its manual clock, or sleep.
	Elapse func(d time.Duration)
	// Settle is how long after a lease's TTL the service may take to act on
	// its expiry: 0 for an in-memory coordinator; about a second for etcd,
	// which revokes expired leases every half second.
	Settle time.Duration
	// LockDelay is the lock-delay the service was made with: 0 for
	// TestService, > 0 for TestLockDelay.
	LockDelay time.Duration
}

// TestService runs the leasefence.Service conformance suite against
// services made by newService, one per subtest. If the service also
// implements leasefence.HolderReader, the suite checks what it answers.
func TestService(t *testing.T, newService func(t testing.TB) Harness) {
	testService(realT{t}, newService)
}

func testService(t tb, newService func(t testing.TB) Harness) {
	tests := []struct {
		name string
		fn   func(t tb, h *suite)
	}{
		{"FencesIncrease", testFencesIncrease},
		{"Held", testHeld},
		{"AlreadyHeld", testAlreadyHeld},
		{"IdempotentRetry", testIdempotentRetry},
		{"StaleRequest", testStaleRequest},
		{"RequestConflict", testRequestConflict},
		{"RenewKeepsTheFence", testRenewKeepsTheFence},
		{"NoResurrection", testNoResurrection},
		{"Released", testReleased},
		{"StaleTokenNeverTouchesANewerHolder", testStaleTokenNeverTouchesNewer},
		{"ReleaseGoesByTokenNotByHolder", testReleaseByToken},
		{"GrantedTTLWithinTheLease", testGrantedTTLWithinTheLease},
		{"Unknown", testUnknown},
		{"OneLiveHolderUnderConcurrentAcquirers", testOneLiveHolder},
		{"BadCalls", testBadCalls},
		{"Holder", testHolder},
		{"Session", testSession},
		{"HoldCleansUp", testHoldCleansUp},
	}
	for _, tt := range tests {
		t.run(tt.name, func(t tb) {
			h := newService(t)
			if h.Service == nil || h.TTL <= 0 || h.Elapse == nil || h.LockDelay != 0 {
				t.Fatalf("leasetest: the factory returned an incomplete Harness for TestService (LockDelay must be 0): %+v", h)
			}
			tt.fn(t, &suite{Harness: h, t: t})
		})
	}
}

// suite is one subtest's harness with helpers that fail the test on an
// error (never on a refusal: the caller checks outcomes).
type suite struct {
	Harness
	t tb
}

func (s *suite) client(holder string) *leasefence.Client {
	s.t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func (s *suite) begin(c *leasefence.Client, resource string) leasefence.AcquireRequest {
	s.t.Helper()
	req, err := c.BeginAcquire(resource)
	if err != nil {
		s.t.Fatal(err)
	}
	return req
}

func (s *suite) acquireReq(req leasefence.AcquireRequest) leasefence.AcquireOutcome {
	s.t.Helper()
	out, err := s.Service.Acquire(s.t.Context(), req)
	if err != nil {
		s.t.Fatalf("Acquire(%+v): %v", req, err)
	}
	return out
}

// mustAcquire acquires resource for c and fails the test unless granted.
func (s *suite) mustAcquire(c *leasefence.Client, resource string) leasefence.Grant {
	s.t.Helper()
	req := s.begin(c, resource)
	out := s.acquireReq(req)
	if !out.OK {
		s.t.Fatalf("Acquire(%q) by %s = %+v, want a grant", resource, c.Holder(), out)
	}
	g := out.Grant
	if g.RequestID != req.RequestID || g.Token.Holder != c.Holder() || g.Token.Resource != resource || g.Token.Fence == 0 || g.TTL <= 0 {
		s.t.Fatalf("grant %+v does not answer %+v", g, req)
	}
	if _, err := c.CompleteAcquire(req, g); err != nil {
		s.t.Fatalf("CompleteAcquire: %v", err)
	}
	return g
}

func (s *suite) renew(c *leasefence.Client, t leasefence.Token) leasefence.RenewOutcome {
	s.t.Helper()
	out, err := s.Service.Renew(s.t.Context(), leasefence.RenewRequest{RequestID: s.begin(c, t.Resource).RequestID, Token: t})
	if err != nil {
		s.t.Fatalf("Renew(%v): %v", t, err)
	}
	return out
}

func (s *suite) release(t leasefence.Token) leasefence.ReleaseOutcome {
	s.t.Helper()
	out, err := s.Service.Release(s.t.Context(), t)
	if err != nil {
		s.t.Fatalf("Release(%v): %v", t, err)
	}
	return out
}

// expire lets every lease granted so far expire at the service.
func (s *suite) expire() { s.Elapse(s.TTL + s.Settle) }

func (s *suite) wantRenew(c *leasefence.Client, tok leasefence.Token, want leasefence.Reason) {
	s.t.Helper()
	if out := s.renew(c, tok); out.OK || out.Reason != want {
		s.t.Fatalf("Renew(%v) = %+v, want %q", tok, out, want)
	}
}

func (s *suite) wantRelease(tok leasefence.Token, want leasefence.Reason) {
	s.t.Helper()
	if out := s.release(tok); out.OK || out.Reason != want {
		s.t.Fatalf("Release(%v) = %+v, want %q", tok, out, want)
	}
}

func (s *suite) wantHeldBy(c *leasefence.Client, resource, holder string) {
	s.t.Helper()
	out := s.acquireReq(s.begin(c, resource))
	if out.OK || out.HeldBy != holder || out.RetryAfter <= 0 {
		s.t.Fatalf("Acquire(%q) by %s = %+v, want refused, held by %s with a RetryAfter", resource, c.Holder(), out, holder)
	}
}

func testFencesIncrease(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	var last leasefence.Fence
	next := func(g leasefence.Grant) {
		t.Helper()
		if g.Token.Fence <= last {
			t.Fatalf("fence %d after %d: fences must strictly increase", g.Token.Fence, last)
		}
		last = g.Token.Fence
	}
	for i := range 3 {
		ga := s.mustAcquire(a, "r1")
		next(ga)
		next(s.mustAcquire(b, fmt.Sprintf("r2-%d", i)))
		if out := s.release(ga.Token); !out.OK {
			t.Fatalf("Release = %+v", out)
		}
	}
	next(s.mustAcquire(b, "r1"))
}

func testHeld(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	s.mustAcquire(a, "r")
	out := s.acquireReq(s.begin(b, "r"))
	if out.OK || out.Reason != leasefence.ReasonHeld || out.HeldBy != "agent-a" {
		t.Fatalf("Acquire of a held resource = %+v, want held by agent-a", out)
	}
	if out.RetryAfter <= 0 || out.RetryAfter > s.TTL {
		t.Fatalf("RetryAfter = %v, want in (0, %v]", out.RetryAfter, s.TTL)
	}
}

func testAlreadyHeld(t tb, s *suite) {
	a := s.client("agent-a")
	g := s.mustAcquire(a, "r")
	out := s.acquireReq(s.begin(a, "r"))
	if out.OK || out.Reason != leasefence.ReasonAlreadyHeld || out.HeldBy != "agent-a" || out.RetryAfter <= 0 || out.RetryAfter > s.TTL {
		t.Fatalf("second Acquire by the holder = %+v, want already-held by agent-a with a RetryAfter", out)
	}
	// The holder's lease is untouched: it still renews under its fence.
	if r := s.renew(a, g.Token); !r.OK || r.Grant.Token != g.Token {
		t.Fatalf("Renew after already-held = %+v", r)
	}
}

func testIdempotentRetry(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	req := s.begin(a, "r")
	first := s.acquireReq(req)
	if !first.OK {
		t.Fatalf("Acquire = %+v", first)
	}
	for range 3 {
		again := s.acquireReq(req)
		if !again.OK || again.Grant.Token != first.Grant.Token || again.Grant.RequestID != req.RequestID || again.Grant.TTL <= 0 || again.Grant.TTL > first.Grant.TTL {
			t.Fatalf("retried Acquire = %+v, want the grant already made %+v", again, first)
		}
	}
	// The retries made no second lease: the resource is held by that one.
	s.wantHeldBy(b, "r", "agent-a")
	if _, err := a.CompleteAcquire(req, first.Grant); err != nil {
		t.Fatal(err)
	}
	if r := s.renew(a, first.Grant.Token); !r.OK {
		t.Fatalf("Renew of the retried grant = %+v", r)
	}
}

func testStaleRequest(t tb, s *suite) {
	a := s.client("agent-a")
	t.run("after release", func(t tb) {
		req := s.begin(a, "released")
		out := s.acquireReq(req)
		if !out.OK {
			t.Fatalf("Acquire = %+v", out)
		}
		if r := s.release(out.Grant.Token); !r.OK {
			t.Fatalf("Release = %+v", r)
		}
		if again := s.acquireReq(req); again.OK || again.Reason != leasefence.ReasonStaleRequest {
			t.Fatalf("retry after release = %+v, want stale-request", again)
		}
	})
	t.run("after expiry", func(t tb) {
		req := s.begin(a, "expired")
		out := s.acquireReq(req)
		if !out.OK {
			t.Fatalf("Acquire = %+v", out)
		}
		s.expire()
		if again := s.acquireReq(req); again.OK || again.Reason != leasefence.ReasonStaleRequest {
			t.Fatalf("retry after expiry = %+v, want stale-request", again)
		}
	})
}

func testRequestConflict(t tb, s *suite) {
	a := s.client("agent-a")
	req := s.begin(a, "r")
	if out := s.acquireReq(req); !out.OK {
		t.Fatalf("Acquire = %+v", out)
	}
	other := req
	other.Holder = "agent-b"
	if out := s.acquireReq(other); out.OK || out.Reason != leasefence.ReasonRequestConflict {
		t.Fatalf("same id, another holder = %+v, want request-conflict", out)
	}
	other = req
	other.Resource = "r2"
	if out := s.acquireReq(other); out.OK || out.Reason != leasefence.ReasonRequestConflict {
		t.Fatalf("same id, another resource = %+v, want request-conflict", out)
	}
	// r2 was not granted by the conflicting request.
	s.mustAcquire(s.client("agent-c"), "r2")
}

func testRenewKeepsTheFence(t tb, s *suite) {
	a := s.client("agent-a")
	g := s.mustAcquire(a, "r")
	for range 3 {
		s.Elapse(s.TTL / 3)
		out := s.renew(a, g.Token)
		if !out.OK || out.Grant.Token != g.Token || out.Grant.TTL <= 0 {
			t.Fatalf("Renew = %+v, want a grant with token %v", out, g.Token)
		}
	}
	// Renewed past the first TTL, it is still held.
	s.wantHeldBy(s.client("agent-b"), "r", "agent-a")
}

func testNoResurrection(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	g := s.mustAcquire(a, "r")
	s.expire()
	s.wantRenew(a, g.Token, leasefence.ReasonExpired)
	s.wantRelease(g.Token, leasefence.ReasonExpired)
	// Still not resurrected after the refused renewal.
	again := s.mustAcquire(b, "r")
	if again.Token.Fence <= g.Token.Fence {
		t.Fatalf("fence %d after expiry of %d", again.Token.Fence, g.Token.Fence)
	}
	// The expired holder acquires again under a new, higher fence.
	if r := s.release(again.Token); !r.OK {
		t.Fatalf("Release = %+v", r)
	}
	if g2 := s.mustAcquire(a, "r"); g2.Token.Fence <= again.Token.Fence {
		t.Fatalf("fence %d after %d", g2.Token.Fence, again.Token.Fence)
	}
}

func testReleased(t tb, s *suite) {
	a := s.client("agent-a")
	g := s.mustAcquire(a, "r")
	if out := s.release(g.Token); !out.OK {
		t.Fatalf("Release = %+v", out)
	}
	s.wantRenew(a, g.Token, leasefence.ReasonReleased)
	s.wantRelease(g.Token, leasefence.ReasonReleased)
}

func testStaleTokenNeverTouchesNewer(t tb, s *suite) {
	a, b, c := s.client("agent-a"), s.client("agent-b"), s.client("agent-c")
	t.run("after release", func(t tb) {
		old := s.mustAcquire(a, "released")
		if out := s.release(old.Token); !out.OK {
			t.Fatalf("Release = %+v", out)
		}
		newer := s.mustAcquire(b, "released")
		s.wantRenew(a, old.Token, leasefence.ReasonSuperseded)
		s.wantRelease(old.Token, leasefence.ReasonSuperseded)
		s.wantHeldBy(c, "released", "agent-b")
		if out := s.renew(b, newer.Token); !out.OK {
			t.Fatalf("newer holder's Renew = %+v", out)
		}
	})
	t.run("after expiry", func(t tb) {
		old := s.mustAcquire(a, "expired")
		s.expire()
		newer := s.mustAcquire(b, "expired")
		s.wantRelease(old.Token, leasefence.ReasonSuperseded)
		s.wantRenew(a, old.Token, leasefence.ReasonSuperseded)
		s.wantHeldBy(c, "expired", "agent-b")
		if out := s.release(newer.Token); !out.OK {
			t.Fatalf("newer holder's Release = %+v", out)
		}
	})
}

func testUnknown(t tb, s *suite) {
	a := s.client("agent-a")
	g := s.mustAcquire(a, "r")
	higher := g.Token
	higher.Fence += 1000
	otherHolder := g.Token
	otherHolder.Holder = "agent-b"
	never := leasefence.Token{Resource: "never-acquired", Holder: "agent-a", Fence: g.Token.Fence}
	for _, tok := range []leasefence.Token{higher, otherHolder, never} {
		s.wantRelease(tok, leasefence.ReasonUnknown)
		s.wantRenew(a, tok, leasefence.ReasonUnknown)
	}
	// None of it touched the real lease.
	if out := s.renew(a, g.Token); !out.OK {
		t.Fatalf("Renew of the real lease = %+v", out)
	}
}

func testOneLiveHolder(t tb, s *suite) {
	const acquirers, rounds = 8, 4
	clients := make([]*leasefence.Client, acquirers)
	for i := range clients {
		clients[i] = s.client(fmt.Sprintf("agent-%d", i))
	}
	var last leasefence.Fence
	for round := range rounds {
		outs := make([]leasefence.AcquireOutcome, acquirers)
		errs := make([]error, acquirers)
		reqs := make([]leasefence.AcquireRequest, acquirers)
		for i, c := range clients {
			reqs[i] = s.begin(c, "contended")
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				outs[i], errs[i] = s.Service.Acquire(t.Context(), reqs[i])
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, out := range outs {
			if errs[i] != nil {
				t.Fatalf("round %d: Acquire: %v", round, errs[i])
			}
			if out.OK {
				if winner >= 0 {
					t.Fatalf("round %d: two live holders: %v and %v", round, outs[winner].Grant.Token, out.Grant.Token)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody acquired a free resource: %+v", round, outs)
		}
		w := outs[winner].Grant.Token
		for i, out := range outs {
			if i != winner && (out.Reason != leasefence.ReasonHeld || out.HeldBy != w.Holder) {
				t.Fatalf("round %d: loser got %+v, want held by %s", round, out, w.Holder)
			}
		}
		if w.Fence <= last {
			t.Fatalf("round %d: fence %d after %d", round, w.Fence, last)
		}
		last = w.Fence
		if out := s.release(w); !out.OK {
			t.Fatalf("round %d: Release = %+v", round, out)
		}
	}
}

func testBadCalls(t tb, s *suite) {
	a := s.client("agent-a")
	var nilCtx context.Context
	req := s.begin(a, "r")
	tok := leasefence.Token{Resource: "r", Holder: "agent-a", Fence: 1}
	if _, err := s.Service.Acquire(nilCtx, req); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Acquire(nil ctx) = %v, want ErrInvalidRequest", err)
	}
	if _, err := s.Service.Renew(nilCtx, leasefence.RenewRequest{RequestID: "x", Token: tok}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Renew(nil ctx) = %v, want ErrInvalidRequest", err)
	}
	if _, err := s.Service.Release(nilCtx, tok); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Release(nil ctx) = %v, want ErrInvalidRequest", err)
	}
	for _, bad := range []leasefence.AcquireRequest{
		{Holder: "agent-a", Resource: "r"},
		{RequestID: "id", Resource: "r"},
		{RequestID: "id", Holder: "agent-a"},
	} {
		if _, err := s.Service.Acquire(t.Context(), bad); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Fatalf("Acquire(%+v) = %v, want ErrInvalidRequest", bad, err)
		}
	}
	for _, bad := range []leasefence.Token{{Holder: "a", Fence: 1}, {Resource: "r", Fence: 1}, {Resource: "r", Holder: "a"}} {
		if _, err := s.Service.Release(t.Context(), bad); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Fatalf("Release(%v) = %v, want ErrInvalidRequest", bad, err)
		}
		if _, err := s.Service.Renew(t.Context(), leasefence.RenewRequest{RequestID: "x", Token: bad}); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Fatalf("Renew(%v) = %v, want ErrInvalidRequest", bad, err)
		}
	}
	if _, err := s.Service.Renew(t.Context(), leasefence.RenewRequest{Token: tok}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Renew without a request id = %v, want ErrInvalidRequest", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if out, err := s.Service.Acquire(ctx, req); err == nil {
		t.Fatalf("Acquire(cancelled ctx) = %+v, want an error", out)
	}
	// Nothing was left held by the bad calls.
	s.mustAcquire(s.client("agent-b"), "r")
}

// testSession runs Hold against the service in real time: a second holder
// waits out the first and gets the lease once it is released.
func testSession(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	first, err := leasefence.Hold(t.Context(), s.Service, a, "r", leasefence.HoldOptions{})
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := leasefence.Hold(short, s.Service, b, "r", leasefence.HoldOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Hold of a held resource, bounded by ctx = %v, want DeadlineExceeded", err)
	}
	type result struct {
		s   *leasefence.Session
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := leasefence.Hold(t.Context(), s.Service, b, "r", leasefence.HoldOptions{MaxWait: 100 * time.Millisecond})
		got <- result{s, err}
	}()
	if out, err := first.Release(t.Context()); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	select {
	case <-first.Lost():
	default:
		t.Fatal("Lost not closed after Release")
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiting Hold: %v", r.err)
	}
	if r.s.Token().Fence <= first.Token().Fence {
		t.Fatalf("fence %d after %d", r.s.Token().Fence, first.Token().Fence)
	}
	if out, err := r.s.Release(t.Context()); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
}
