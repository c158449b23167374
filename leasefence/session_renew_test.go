package leasefence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// newSkewedFixture is newSessionFixture with a client that reserves skew.
func newSkewedFixture(t *testing.T, skew time.Duration) *sessionFixture {
	t.Helper()
	f := newSessionFixture(t)
	f.client = newClient(t, f.time.client, "agent-a", skew)
	return f
}

// A skew of a third of the TTL or more once put every renewal due before it
// was sent: the session renewed in a tight loop. Renewals are now spaced
// from their own send instants, RenewEvery apart.
func TestSessionRenewalsSpacedFromTheirSendInstant(t *testing.T) {
	for _, tt := range []struct {
		name  string
		skew  time.Duration
		every time.Duration // HoldOptions.RenewEvery
		want  time.Duration // the spacing of renewals
	}{
		{"skew a third of the TTL, RenewEvery a third", time.Second, time.Second, time.Second},
		{"skew half the TTL, RenewEvery 1s", 1500 * time.Millisecond, time.Second, time.Second},
		{"skew a third of the TTL, default RenewEvery", time.Second, 0, 2 * time.Second / 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newSkewedFixture(t, tt.skew)
			s := f.hold(t, leasefence.HoldOptions{RenewEvery: tt.every})
			f.time.waitArmed(t, 2)
			time.Sleep(20 * time.Millisecond) // room for a storm to show
			if n := f.svc.renews.Load(); n != 0 {
				t.Fatalf("%d renewals before any time passed, want 0", n)
			}
			armed := 2
			for i := int64(1); i <= 5; i++ {
				f.time.Advance(tt.want - time.Millisecond)
				time.Sleep(5 * time.Millisecond)
				if n := f.svc.renews.Load(); n != i-1 {
					t.Fatalf("%d renewals %v before renewal %d was due, want %d", n, time.Millisecond, i, i-1)
				}
				f.time.Advance(time.Millisecond)
				armed += 2
				f.time.waitArmed(t, armed)
				if n := f.svc.renews.Load(); n != i {
					t.Fatalf("%d renewals after %d periods, want %d", n, i, i)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("lost while renewing: %v", err)
			}
		})
	}
}

// A skew that leaves no time to renew in is refused by Hold, with a named
// error that says why, and the lease it got is released.
func TestHoldRefusesASkewThatLeavesNoRoomToRenew(t *testing.T) {
	for _, tt := range []struct {
		name  string
		skew  time.Duration
		every time.Duration
	}{
		{"RenewEvery at the holder's window", 2 * time.Second, time.Second},
		{"RenewEvery past the holder's window", 2500 * time.Millisecond, time.Second},
		{"skew as long as the TTL", 3 * time.Second, 0},
		{"RenewEvery at the TTL, no skew", 0, 3 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newSkewedFixture(t, tt.skew)
			s, err := leasefence.Hold(t.Context(), f.svc, f.client, "r", leasefence.HoldOptions{RenewEvery: tt.every, After: f.time.After})
			if s != nil || !errors.Is(err, leasefence.ErrNoRoomToRenew) || !strings.Contains(err.Error(), "ClockSkew "+tt.skew.String()) {
				t.Fatalf("Hold = %v, %v; want ErrNoRoomToRenew naming the ClockSkew", s, err)
			}
			if n := f.svc.renews.Load(); n != 0 {
				t.Fatalf("%d renewals sent", n)
			}
			if n := f.svc.releases.Load(); n != 1 {
				t.Fatalf("%d releases, want the grant released", n)
			}
		})
	}
}

// Errors that outlast the holder's window, with the same request resent,
// end in a grant that is dead on arrival. Hold releases it and acquires
// afresh rather than hand it out.
func TestHoldNeverReturnsADeadSession(t *testing.T) {
	f := newSkewedFixture(t, time.Second) // the holder's window: 2 s of the 3 s TTL
	f.svc.dropAcquireReplies.Store(1)
	done := make(chan *leasefence.Session, 1)
	go func() {
		s, err := leasefence.Hold(t.Context(), f.svc, f.client, "r", leasefence.HoldOptions{After: f.time.After})
		if err != nil {
			t.Errorf("Hold: %v", err)
		}
		done <- s
	}()
	f.time.waitArmed(t, 1) // the backoff after the lost reply
	// The retry, 2.5 s after the first send, gets the first grant back
	// (still live at the coordinator until 3 s), past the holder's deadline.
	f.time.Advance(2500 * time.Millisecond)
	s := <-done
	if s == nil {
		return
	}
	t.Cleanup(func() { _, _ = s.Release(context.Background()) })
	if err := s.Err(); err != nil {
		t.Fatalf("Hold returned a lost session: %v", err)
	}
	left, err := s.Remaining()
	if err != nil || left != 2*time.Second {
		t.Fatalf("Remaining = %v, %v; want the full 2 s window of a fresh request", left, err)
	}
	if s.Token().Fence != 2 || f.svc.releases.Load() != 1 || f.svc.acquires.Load() != 3 {
		t.Fatalf("fence %d after %d acquires and %d releases; want fence 2 after 3 acquires and the dead grant released",
			s.Token().Fence, f.svc.acquires.Load(), f.svc.releases.Load())
	}
}

// slowRenewals answers each renewal only once release is closed.
type slowRenewals struct {
	leasefence.Service
	sent    chan struct{}
	release chan struct{}
}

func (s slowRenewals) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	s.sent <- struct{}{}
	<-s.release
	return s.Service.Renew(ctx, req)
}

// A renewal answered after the deadline it earned ends the session, and no
// renewal is sent for that dead lease.
func TestSessionRenewalAnsweredPastItsDeadline(t *testing.T) {
	f := newSessionFixture(t)
	svc := slowRenewals{Service: f.svc, sent: make(chan struct{}, 4), release: make(chan struct{})}
	s, err := leasefence.Hold(t.Context(), svc, f.client, "r", leasefence.HoldOptions{After: f.time.After})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Release(context.Background()) })
	f.time.waitArmed(t, 2)
	f.time.Advance(time.Second) // the renewal is sent at 1 s: it earns a deadline at 4 s
	<-svc.sent
	f.time.client.Advance(3 * time.Second) // answered at 4 s on the holder's clock
	close(svc.release)
	time.Sleep(50 * time.Millisecond) // room for a second renewal to be sent
	if n := f.svc.renews.Load(); n != 1 {
		t.Fatalf("%d renewals, want the late one only", n)
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "not renewed within its 3s deadline") {
		t.Fatalf("Err = %v", err)
	}
}
