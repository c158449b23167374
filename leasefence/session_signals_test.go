package leasefence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// A paused process wakes up with timers that have not fired yet. Whatever
// the holder reads first (Lost, Err, Context, Remaining) must already say
// the lease is gone: the test moves the client's clock past the deadline
// without firing a timer, so the renewing goroutine never wakes, and reads.
func TestSessionSignalsAreTrueWhenRead(t *testing.T) {
	const want = "lease on r lost: not renewed within its 3s deadline"
	for _, tt := range []struct {
		name string
		read func(s *leasefence.Session) bool // reports whether it says the session is over
	}{
		{"Lost", func(s *leasefence.Session) bool { return isClosed(s.Lost()) }},
		{"Err", func(s *leasefence.Session) bool { return s.Err() != nil }},
		{"Context().Err", func(s *leasefence.Session) bool { return s.Context().Err() != nil }},
		{"Context().Done", func(s *leasefence.Session) bool { return isClosed(s.Context().Done()) }},
		{"Remaining", func(s *leasefence.Session) bool { _, err := s.Remaining(); return err != nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newSessionFixture(t)
			f.svc.failRenews.Store(true)
			s := f.hold(t, leasefence.HoldOptions{})
			ctx := s.Context()
			f.time.waitArmed(t, 2)
			f.time.client.Advance(3 * time.Second) // the deadline; no timer fires
			if !tt.read(s) {
				t.Fatalf("%s read first at the deadline says the session holds", tt.name)
			}
			err := s.Err()
			if !errors.Is(err, leasefence.ErrLeaseLost) || errors.Is(err, leasefence.ErrReleased) || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Err = %v, want ErrLeaseLost (not ErrReleased) saying %q", err, want)
			}
			if !isClosed(s.Lost()) || !isClosed(ctx.Done()) || !errors.Is(ctx.Err(), context.Canceled) || context.Cause(ctx) != err {
				t.Fatalf("Lost %v, Context done %v, err %v, cause %v; want all ended by %v", isClosed(s.Lost()), isClosed(ctx.Done()), ctx.Err(), context.Cause(ctx), err)
			}
			if left, rerr := s.Remaining(); left != 0 || rerr != err {
				t.Fatalf("Remaining = %v, %v", left, rerr)
			}
			if n := f.svc.renews.Load(); n != 0 {
				t.Fatalf("%d renewals: the renewing goroutine ran", n)
			}
		})
	}
}

func TestSessionRemainingOnTheClientsClock(t *testing.T) {
	f := newSkewedFixture(t, 500*time.Millisecond)
	s := f.hold(t, leasefence.HoldOptions{})
	if left, err := s.Remaining(); left != 2500*time.Millisecond || err != nil {
		t.Fatalf("Remaining = %v, %v; want TTL 3s - skew 500ms", left, err)
	}
	f.time.client.Advance(time.Second / 4)
	if left, err := s.Remaining(); left != 2250*time.Millisecond || err != nil {
		t.Fatalf("Remaining after 250ms = %v, %v", left, err)
	}
	if s.TTL() != 3*time.Second || s.Lease().TTL != s.TTL() {
		t.Fatalf("TTL = %v, lease TTL %v; want the granted 3s", s.TTL(), s.Lease().TTL)
	}
}

type holdKey struct{}

// Work started under Session.Context stops when the session ends; its
// cause says why, and it keeps Hold's values.
func TestSessionContextEndsWithTheSession(t *testing.T) {
	f := newSessionFixture(t)
	holdCtx := context.WithValue(t.Context(), holdKey{}, "span")
	s, err := leasefence.Hold(holdCtx, f.svc, f.client, "r", leasefence.HoldOptions{After: f.time.After})
	if err != nil {
		t.Fatal(err)
	}
	ctx := s.Context()
	work, cancel := context.WithCancel(ctx)
	defer cancel()
	if ctx.Err() != nil || work.Err() != nil || ctx.Value(holdKey{}) != "span" {
		t.Fatalf("a live session's context: err %v, derived err %v, value %v", ctx.Err(), work.Err(), ctx.Value(holdKey{}))
	}
	if out, err := s.Release(t.Context()); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	waitClosed(t, work.Done(), "a context derived from the session's, after Release")
	err = s.Err()
	if !errors.Is(err, leasefence.ErrReleased) || !errors.Is(err, leasefence.ErrLeaseLost) || !strings.HasPrefix(err.Error(), "lease on r released by its holder") {
		t.Fatalf("Err after Release = %v, want ErrReleased (and ErrLeaseLost) saying so", err)
	}
	if context.Cause(work) != err || context.Cause(ctx) != err {
		t.Fatalf("causes %v, %v; want %v", context.Cause(work), context.Cause(ctx), err)
	}
}

// A refused renewal is said in words.
func TestSessionLossSaysWhy(t *testing.T) {
	f := newSessionFixture(t)
	s := f.hold(t, leasefence.HoldOptions{})
	f.time.waitArmed(t, 2)
	if out, err := f.coord.Release(s.Token()); err != nil || !out.OK {
		t.Fatal(out, err)
	}
	f.time.Advance(time.Second)
	waitClosed(t, s.Lost(), "Lost after a refused renewal")
	if got, want := s.Err().Error(), "lease on r lost: its renewal was refused: released (holder agent-a, fence 1)"; !strings.HasPrefix(got, want) {
		t.Fatalf("Err = %q, want it to start %q", got, want)
	}
}

func TestTryHold(t *testing.T) {
	f := newSessionFixture(t)
	other := newClient(t, f.time.client, "agent-b", 0)
	held, _ := acquireLease(t, other, f.coord, "busy")

	_, err := leasefence.TryHold(t.Context(), f.svc, f.client, "busy", leasefence.HoldOptions{After: f.time.After})
	var he *leasefence.HeldError
	if !errors.Is(err, leasefence.ErrHeld) || !errors.As(err, &he) || he.HeldBy != "agent-b" || he.RetryAfter != 3*time.Second || he.Resource != "busy" {
		t.Fatalf("TryHold of a held resource = %v (%+v), want a HeldError naming agent-b for 3s", err, he)
	}
	if n := f.svc.acquires.Load(); n != 1 {
		t.Fatalf("%d acquires, want one attempt", n)
	}

	f.svc.dropAcquireReplies.Store(1)
	if _, err := leasefence.TryHold(t.Context(), f.svc, f.client, "r", leasefence.HoldOptions{After: f.time.After}); !errors.Is(err, errNoReply) {
		t.Fatalf("TryHold with a lost reply = %v, want that error", err)
	}
	// One attempt, then the same request once more, only to release the
	// grant the lost reply carried: the resource is free again.
	if n, r := f.svc.acquires.Load(), f.svc.releases.Load(); n != 3 || r != 1 {
		t.Fatalf("%d acquires and %d releases, want the attempt, one resend to clean up and its release", n, r)
	}
	acquireLease(t, other, f.coord, "r")

	s, err := leasefence.TryHold(t.Context(), f.svc, f.client, "free", leasefence.HoldOptions{After: f.time.After})
	if err != nil {
		t.Fatalf("TryHold of a free resource: %v", err)
	}
	defer s.Release(context.Background())
	if s.Token().Fence <= held.Token.Fence || s.Err() != nil {
		t.Fatalf("TryHold = %v, %v", s.Token(), s.Err())
	}
}

// HoldOptions.AdmitAt raises the gate's floor to the new token before Hold
// returns: the previous holder's late write is refused before the new
// holder has written anything.
func TestHoldAdmitsAtTheGates(t *testing.T) {
	f := newSessionFixture(t)
	gate := leasefence.NewFenceGate("r")
	old := newClient(t, f.time.client, "agent-b", 0)
	stale, _ := acquireLease(t, old, f.coord, "r")
	if out, err := f.coord.Release(stale.Token); err != nil || !out.OK {
		t.Fatal(out, err)
	}
	s := f.hold(t, leasefence.HoldOptions{AdmitAt: []leasefence.Gate{leasefence.AsGate(gate)}})
	if gate.Floor() != s.Token() {
		t.Fatalf("floor %v after Hold, want the session's token %v", gate.Floor(), s.Token())
	}
	err := gate.Commit(t.Context(), stale.Token, func(context.Context) error { return nil })
	if !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("the previous holder's late write = %v, want refused", err)
	}

	// A gate that refuses the token fails Hold, and the lease is released.
	newer := leasefence.NewFenceGate("r2", leasefence.WithInitialFloor(1000))
	_, err = leasefence.Hold(t.Context(), f.svc, f.client, "r2", leasefence.HoldOptions{After: f.time.After, AdmitAt: []leasefence.Gate{leasefence.AsGate(newer)}})
	if !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("Hold with a gate past the token = %v, want the gate's ErrStaleFence", err)
	}
	if tok, held, _ := f.coord.Holder("r2"); held {
		t.Fatalf("%v still holds r2 after the refused admit", tok)
	}
}
