package leasetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	// TTL is the lease duration the service grants. In real time, choose
	// it far above the time a call takes on the slowest machine the suite
	// runs on: a check the load delayed past a holder's deadline proves
	// nothing and skips its subtest.
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

	deadlines *deadlines
}

// in is s for t, a subtest of s.t: its helpers end t, not its parent, and
// it shares s's deadlines.
func (s *suite) in(t tb) *suite {
	return &suite{Harness: s.Harness, t: t, deadlines: s.book()}
}

// deadlines holds, for each token the suite was granted, the instant on
// the suite's clock up to which its holder may count on the lease: the
// first request's send plus the TTL granted, or a renewal's send plus the
// TTL renewed, as a holder dates its deadline. Before it no other holder
// may be granted the resource, whatever the load.
type deadlines struct {
	mu sync.Mutex
	m  map[leasefence.Token]time.Time
}

// book is s's deadlines, made on the first call, which is on the test's
// goroutine.
func (s *suite) book() *deadlines {
	if s.deadlines == nil {
		s.deadlines = &deadlines{m: map[leasefence.Token]time.Time{}}
	}
	return s.deadlines
}

// granted records the deadline of a grant of tok asked for at sent. A
// retried request dates from its first send, so an earlier deadline stays.
func (s *suite) granted(tok leasefence.Token, sent time.Time, ttl time.Duration, renewal bool) {
	d := s.book()
	d.mu.Lock()
	defer d.mu.Unlock()
	prev, ok := d.m[tok]
	if until := sent.Add(ttl); !ok || renewal && until.After(prev) {
		d.m[tok] = until
	}
}

// deadline is the deadline granted records for tok.
func (s *suite) deadline(tok leasefence.Token) (time.Time, bool) {
	d := s.book()
	d.mu.Lock()
	defer d.mu.Unlock()
	until, ok := d.m[tok]
	return until, ok
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
	sent := time.Now()
	out, err := s.Service.Acquire(s.t.Context(), req)
	if err != nil {
		s.t.Fatalf("Acquire(%+v): %v", req, err)
	}
	if out.OK {
		s.granted(out.Grant.Token, sent, out.Grant.TTL, false)
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
	req := leasefence.RenewRequest{RequestID: s.begin(c, t.Resource).RequestID, Token: t}
	sent := time.Now()
	out, err := s.Service.Renew(s.t.Context(), req)
	if err != nil {
		s.t.Fatalf("Renew(%v): %v", t, err)
	}
	if out.OK {
		s.granted(t, sent, out.Grant.TTL, true)
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

// wantRenewed requires tok's renewal, sent while its holder could count on
// the lease, to keep tok, as whileHeld judges it.
func (s *suite) wantRenewed(c *leasefence.Client, tok leasefence.Token) leasefence.RenewOutcome {
	s.t.Helper()
	out := s.renew(c, tok)
	ok := out.OK && out.Grant.Token == tok && out.Grant.TTL > 0
	s.whileHeld(tok, ok, fmt.Sprintf("Renew(%v) = %+v", tok, out), "a grant of "+tok.String())
	return out
}

// wantReleased requires tok's release, sent while its holder could count
// on the lease, to release it, as whileHeld judges it.
func (s *suite) wantReleased(tok leasefence.Token) {
	s.t.Helper()
	out := s.release(tok)
	s.whileHeld(tok, out.OK, fmt.Sprintf("Release(%v) = %+v", tok, out), "released")
}

// wantHeldBy requires c's acquire of tok's resource to be refused, held by
// tok's holder, with a RetryAfter, as whileHeld judges it.
func (s *suite) wantHeldBy(c *leasefence.Client, tok leasefence.Token) {
	s.t.Helper()
	out := s.acquireReq(s.begin(c, tok.Resource))
	ok := !out.OK && out.HeldBy == tok.Holder && out.RetryAfter > 0
	s.whileHeld(tok, ok, fmt.Sprintf("Acquire(%q) by %s = %+v", tok.Resource, c.Holder(), out), "refused, held by "+tok.Holder+" with a RetryAfter")
}

// whileHeld judges an answer (got, which ok says is the one wanted) to a
// call made while tok's holder could count on its lease. An answer that
// came after tok's deadline proves nothing (a machine that stalls for a
// whole TTL lets the lease end in between): it skips the test. One that
// came before it and is not ok fails it.
func (s *suite) whileHeld(tok leasefence.Token, ok bool, got, want string) {
	s.t.Helper()
	if !s.judged(tok, ok, got, want) {
		s.t.Skipf("%s came after %v's deadline: the machine stalled for a whole TTL, nothing to judge", got, tok)
	}
}

// judged is whileHeld that returns false rather than skip.
func (s *suite) judged(tok leasefence.Token, ok bool, got, want string) bool {
	s.t.Helper()
	if ok {
		return true
	}
	deadline, found := s.deadline(tok)
	if !found {
		s.t.Fatalf("leasetest: no deadline recorded for %v", tok)
	}
	if late := time.Since(deadline); late >= 0 {
		s.t.Logf("%s, %v after %v's deadline: not judged", got, late, tok)
		return false
	}
	s.t.Fatalf("%s before %v's deadline, want %s", got, tok, want)
	return true
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
		s.wantReleased(ga.Token)
	}
	next(s.mustAcquire(b, "r1"))
}

func testHeld(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	g := s.mustAcquire(a, "r")
	out := s.acquireReq(s.begin(b, "r"))
	ok := !out.OK && out.Reason == leasefence.ReasonHeld && out.HeldBy == "agent-a" && out.RetryAfter > 0 && out.RetryAfter <= s.TTL
	s.whileHeld(g.Token, ok, fmt.Sprintf("Acquire of a held resource = %+v", out), fmt.Sprintf("held by agent-a with a RetryAfter in (0, %v]", s.TTL))
}

func testAlreadyHeld(t tb, s *suite) {
	a := s.client("agent-a")
	g := s.mustAcquire(a, "r")
	out := s.acquireReq(s.begin(a, "r"))
	ok := !out.OK && out.Reason == leasefence.ReasonAlreadyHeld && out.HeldBy == "agent-a" && out.RetryAfter > 0 && out.RetryAfter <= s.TTL
	s.whileHeld(g.Token, ok, fmt.Sprintf("second Acquire by the holder = %+v", out), "already-held by agent-a with a RetryAfter")
	// The holder's lease is untouched: it still renews under its fence.
	s.wantRenewed(a, g.Token)
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
		ok := again.OK && again.Grant.Token == first.Grant.Token && again.Grant.RequestID == req.RequestID && again.Grant.TTL > 0 && again.Grant.TTL <= first.Grant.TTL
		s.whileHeld(first.Grant.Token, ok, fmt.Sprintf("retried Acquire = %+v", again), fmt.Sprintf("the grant already made %+v", first))
	}
	// The retries made no second lease: the resource is held by that one.
	s.wantHeldBy(b, first.Grant.Token)
	if _, err := a.CompleteAcquire(req, first.Grant); err != nil {
		t.Fatal(err)
	}
	s.wantRenewed(a, first.Grant.Token)
}

func testStaleRequest(t tb, s *suite) {
	a := s.client("agent-a")
	t.run("after release", func(t tb) {
		s := s.in(t)
		req := s.begin(a, "released")
		out := s.acquireReq(req)
		if !out.OK {
			t.Fatalf("Acquire = %+v", out)
		}
		s.wantReleased(out.Grant.Token)
		if again := s.acquireReq(req); again.OK || again.Reason != leasefence.ReasonStaleRequest {
			t.Fatalf("retry after release = %+v, want stale-request", again)
		}
	})
	t.run("after expiry", func(t tb) {
		s := s.in(t)
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
		s.wantRenewed(a, g.Token)
	}
	// Renewed past the first TTL, it is still held.
	s.wantHeldBy(s.client("agent-b"), g.Token)
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
	s.wantReleased(again.Token)
	if g2 := s.mustAcquire(a, "r"); g2.Token.Fence <= again.Token.Fence {
		t.Fatalf("fence %d after %d", g2.Token.Fence, again.Token.Fence)
	}
}

func testReleased(t tb, s *suite) {
	a := s.client("agent-a")
	g := s.mustAcquire(a, "r")
	s.wantReleased(g.Token)
	s.wantRenew(a, g.Token, leasefence.ReasonReleased)
	s.wantRelease(g.Token, leasefence.ReasonReleased)
}

func testStaleTokenNeverTouchesNewer(t tb, s *suite) {
	a, b, c := s.client("agent-a"), s.client("agent-b"), s.client("agent-c")
	t.run("after release", func(t tb) {
		s := s.in(t)
		old := s.mustAcquire(a, "released")
		s.wantReleased(old.Token)
		newer := s.mustAcquire(b, "released")
		s.wantRenew(a, old.Token, leasefence.ReasonSuperseded)
		s.wantRelease(old.Token, leasefence.ReasonSuperseded)
		s.wantHeldBy(c, newer.Token)
		s.wantRenewed(b, newer.Token)
	})
	t.run("after expiry", func(t tb) {
		s := s.in(t)
		old := s.mustAcquire(a, "expired")
		s.expire()
		newer := s.mustAcquire(b, "expired")
		s.wantRelease(old.Token, leasefence.ReasonSuperseded)
		s.wantRenew(a, old.Token, leasefence.ReasonSuperseded)
		s.wantHeldBy(c, newer.Token)
		s.wantReleased(newer.Token)
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
	s.wantRenewed(a, g.Token)
}

// testOneLiveHolder: acquirers racing for a free resource get one lease
// between them. Two grants are two live holders when their holders could
// count on the lease at once, on the suite's clock: each grant answered
// before the other's deadline (its send plus the TTL granted), as a holder
// dates it, however slow the service. A round that outlasted a TTL may
// grant again after an expiry, which is correct; it is not judged for one
// holder (its fences must still rise and every loser must name a holder
// granted in the round), and a run whose every round did so skips.
func testOneLiveHolder(t tb, s *suite) {
	const acquirers, rounds = 8, 4
	clients := make([]*leasefence.Client, acquirers)
	for i := range clients {
		clients[i] = s.client(fmt.Sprintf("agent-%d", i))
	}
	var last leasefence.Fence
	judged := 0
	for round := range rounds {
		outs := make([]leasefence.AcquireOutcome, acquirers)
		errs := make([]error, acquirers)
		reqs := make([]leasefence.AcquireRequest, acquirers)
		sent := make([]time.Time, acquirers)
		answered := make([]time.Time, acquirers)
		for i, c := range clients {
			reqs[i] = s.begin(c, "contended")
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				<-start
				sent[i] = time.Now()
				outs[i], errs[i] = s.Service.Acquire(t.Context(), reqs[i])
				answered[i] = time.Now()
			})
		}
		close(start)
		wg.Wait()
		var winners []int
		granted := map[string]bool{}
		for i, out := range outs {
			if errs[i] != nil {
				t.Fatalf("round %d: Acquire: %v", round, errs[i])
			}
			if out.OK {
				winners = append(winners, i)
				granted[out.Grant.Token.Holder] = true
				s.granted(out.Grant.Token, sent[i], out.Grant.TTL, false)
			}
		}
		if len(winners) == 0 {
			t.Fatalf("round %d: nobody acquired a free resource: %+v", round, outs)
		}
		deadline := func(i int) time.Time { return sent[i].Add(outs[i].Grant.TTL) }
		for x, i := range winners {
			for _, j := range winners[x+1:] {
				later := answered[i]
				if answered[j].After(later) {
					later = answered[j]
				}
				if later.Before(deadline(i)) && later.Before(deadline(j)) {
					t.Fatalf("round %d: two live holders: %v and %v, each granted before the other's deadline", round, outs[i].Grant.Token, outs[j].Grant.Token)
				}
			}
		}
		slices.SortFunc(winners, func(i, j int) int { return cmp.Compare(outs[i].Grant.Token.Fence, outs[j].Grant.Token.Fence) })
		for _, i := range winners {
			if f := outs[i].Grant.Token.Fence; f <= last {
				t.Fatalf("round %d: fence %d after %d", round, f, last)
			}
			last = outs[i].Grant.Token.Fence
		}
		for _, out := range outs {
			if !out.OK && (out.Reason != leasefence.ReasonHeld || !granted[out.HeldBy]) {
				t.Fatalf("round %d: loser got %+v, want held by a holder granted in the round: %v", round, out, granted)
			}
		}
		if len(winners) == 1 {
			judged++
		} else {
			t.Logf("round %d: %d grants, each after the one before's deadline: the round outlasted a TTL, and is not judged for one holder", round, len(winners))
		}
		w := outs[winners[len(winners)-1]].Grant.Token
		out := s.release(w)
		s.judged(w, out.OK, fmt.Sprintf("round %d: Release(%v) = %+v", round, w, out), "released")
	}
	if judged == 0 {
		t.Skip("every round outlasted a TTL: nothing to judge")
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
