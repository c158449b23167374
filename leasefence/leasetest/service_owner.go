package leasetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasefence/lab/leasefence"
)

// testReleaseByToken: a release goes by the token, never by the holder's
// name. A holder that acquired again (after releasing, or after its lease
// expired) and then releases, or renews, its OLD token must leave its newer
// lease alone: a backend that looks the lease up by holder frees the newer
// one, and a second holder then overlaps the first's writes.
func testReleaseByToken(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	for _, c := range []struct {
		resource string
		end      func(old leasefence.Token) // ends the old lease
	}{
		{"released", func(old leasefence.Token) {
			s.wantReleased(old)
		}},
		{"expired", func(leasefence.Token) { s.expire() }},
	} {
		old := s.mustAcquire(a, c.resource).Token
		c.end(old)
		newer := s.mustAcquire(a, c.resource).Token
		if newer.Fence <= old.Fence {
			t.Fatalf("%s: fence %d after %d", c.resource, newer.Fence, old.Fence)
		}
		s.wantRelease(old, leasefence.ReasonSuperseded)
		s.wantRenew(a, old, leasefence.ReasonSuperseded)
		s.wantHeldBy(b, newer)
		s.wantRenewed(a, newer)
	}
}

// testGrantedTTLWithinTheLease: the TTL a grant reports is the time the
// service keeps the lease from when it dated it, never more. A service that
// dated the lease when it processed the request but reports a TTL counted
// from its reply (or from any later instant) lets the holder's deadline,
// sentAt + TTL, fall after the lease is free for another holder. The suite
// lets two thirds of the granted TTL pass after the reply, then asks: an
// honest lease is still held, and a TTL inflated by more than a fifth of
// the real one is caught.
//
// On a real clock a machine that stalls can make the wait overshoot; a
// round whose other acquire was answered after the holder's deadline,
// measured from before the request on the suite's own clock, proves
// nothing, and is tried again.
func testGrantedTTLWithinTheLease(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	for _, renew := range []bool{false, true} {
		judged := false
		for try := 0; try < 3 && !judged; try++ {
			g := s.mustAcquire(a, "r")
			ttl := g.TTL
			if renew {
				ttl = s.wantRenewed(a, g.Token).Grant.TTL
			}
			s.Elapse(ttl * 2 / 3)
			out := s.acquireReq(s.begin(b, "r"))
			ok := !out.OK && out.HeldBy == "agent-a" && out.RetryAfter > 0
			judged = s.judged(g.Token, ok, fmt.Sprintf("Acquire(%q) by agent-b = %+v", "r", out), "refused, held by agent-a with a RetryAfter")
			if out.OK {
				s.release(out.Grant.Token) // a try not judged: b's grant goes too
			}
			if out := s.release(g.Token); judged {
				s.judged(g.Token, out.OK, fmt.Sprintf("Release(%v) = %+v", g.Token, out), "released")
			}
		}
		if !judged {
			t.Skip("the machine stalled for a whole TTL in every try: nothing to judge")
		}
	}
}

// testHolder checks leasefence.HolderReader, if the service implements it:
// the live lease's token while there is one, and none when the resource is
// free, released or expired.
func testHolder(t tb, s *suite) {
	hr, ok := s.Service.(leasefence.HolderReader)
	if !ok {
		t.Skip("the service does not implement leasefence.HolderReader")
	}
	holder := func(resource string) (leasefence.Token, bool) {
		t.Helper()
		tok, held, err := hr.Holder(t.Context(), resource)
		if err != nil {
			t.Fatalf("Holder(%q): %v", resource, err)
		}
		return tok, held
	}
	wantNone := func(resource, when string) {
		t.Helper()
		if tok, held := holder(resource); held || tok != (leasefence.Token{}) {
			t.Fatalf("Holder(%q) %s = %v, %v; want none", resource, when, tok, held)
		}
	}
	wantHolder := func(resource string, want leasefence.Token, when string) {
		t.Helper()
		tok, held := holder(resource)
		s.whileHeld(want, held && tok == want, fmt.Sprintf("Holder(%q) %s = %v, %v", resource, when, tok, held), want.String())
	}
	a, b := s.client("agent-a"), s.client("agent-b")
	wantNone("r", "before any acquire")
	ga := s.mustAcquire(a, "r")
	wantHolder("r", ga.Token, "after a's acquire")
	wantNone("r2", "of another resource")
	s.wantRenewed(a, ga.Token)
	wantHolder("r", ga.Token, "after a's renewal")
	s.wantReleased(ga.Token)
	wantNone("r", "after a's release")
	gb := s.mustAcquire(b, "r")
	wantHolder("r", gb.Token, "after b's acquire")
	s.expire()
	wantNone("r", "after b's lease expired")

	var nilCtx context.Context
	if _, _, err := hr.Holder(nilCtx, "r"); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Holder(nil ctx) = %v, want ErrInvalidRequest", err)
	}
	if _, _, err := hr.Holder(t.Context(), ""); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf(`Holder("") = %v, want ErrInvalidRequest`, err)
	}
}
