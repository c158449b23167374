package leasetest

import (
	"context"
	"errors"
	"time"

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
			if out := s.release(old); !out.OK {
				t.Fatalf("Release(%v) = %+v", old, out)
			}
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
		s.wantHeldBy(b, c.resource, "agent-a")
		if out := s.renew(a, newer); !out.OK || out.Grant.Token != newer {
			t.Fatalf("%s: Renew of the newer lease %v after the old token's release = %+v", c.resource, newer, out)
		}
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
// round whose wait, measured from before the request on the suite's own
// clock, reached the granted TTL proves nothing, and is tried again.
func testGrantedTTLWithinTheLease(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	for _, renew := range []bool{false, true} {
		judged := false
		for try := 0; try < 3 && !judged; try++ {
			sent := time.Now()
			g := s.mustAcquire(a, "r")
			ttl := g.TTL
			if renew {
				sent = time.Now()
				out := s.renew(a, g.Token)
				if !out.OK {
					t.Fatalf("Renew = %+v", out)
				}
				ttl = out.Grant.TTL
			}
			s.Elapse(ttl * 2 / 3)
			if judged = time.Since(sent) < ttl; judged {
				s.wantHeldBy(b, "r", "agent-a")
			}
			if out := s.release(g.Token); !out.OK && judged {
				t.Fatalf("Release = %+v", out)
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
		if tok, held := holder(resource); !held || tok != want {
			t.Fatalf("Holder(%q) %s = %v, %v; want %v", resource, when, tok, held, want)
		}
	}
	a, b := s.client("agent-a"), s.client("agent-b")
	wantNone("r", "before any acquire")
	ga := s.mustAcquire(a, "r")
	wantHolder("r", ga.Token, "after a's acquire")
	wantNone("r2", "of another resource")
	if out := s.renew(a, ga.Token); !out.OK {
		t.Fatalf("Renew = %+v", out)
	}
	wantHolder("r", ga.Token, "after a's renewal")
	if out := s.release(ga.Token); !out.OK {
		t.Fatalf("Release = %+v", out)
	}
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
