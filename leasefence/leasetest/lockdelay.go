package leasetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// TestLockDelay runs the lock-delay conformance suite against services
// made by newService, one per subtest, each with a lock-delay of
// Harness.LockDelay (> 0) and every other option as TestService runs it.
// What it checks:
//
//   - after a lease expires, the resource is refused to everyone, its last
//     holder included, with the reason "lock-delay" and a RetryAfter in
//     (0, LockDelay]; still refused halfway through the delay; granted
//     under a higher fence once the last RetryAfter (and Settle) has
//     passed;
//   - the expired holder's renewal and release are answered "expired", and
//     its release does not end the delay;
//   - a service that implements leasefence.HolderReader reports no holder
//     during the delay;
//   - a release ends the lease with no delay: the next acquire, by anyone,
//     is granted at once.
//
// The delay may be counted from the lease's expiry or, by a store that
// learns of the expiry only when an acquire finds it, from that acquire:
// the suite's timing allows both.
func TestLockDelay(t *testing.T, newService func(t testing.TB) Harness) {
	testLockDelay(realT{t}, newService)
}

func testLockDelay(t tb, newService func(t testing.TB) Harness) {
	tests := []struct {
		name string
		fn   func(t tb, h *suite)
	}{
		{"AfterExpiry", testLockDelayAfterExpiry},
		{"NotAfterRelease", testNoLockDelayAfterRelease},
	}
	for _, tt := range tests {
		t.run(tt.name, func(t tb) {
			h := newService(t)
			if h.Service == nil || h.TTL <= 0 || h.Elapse == nil || h.LockDelay <= 0 {
				t.Fatalf("leasetest: the factory returned an incomplete Harness for TestLockDelay (LockDelay must be > 0): %+v", h)
			}
			tt.fn(t, &suite{Harness: h, t: t})
		})
	}
}

// wantLockDelay asks for resource as c and fails unless the answer is a
// lock-delay refusal with a RetryAfter in (0, LockDelay], which it returns.
func (s *suite) wantLockDelay(c *leasefence.Client, resource, when string) leasefence.AcquireOutcome {
	s.t.Helper()
	out := s.acquireReq(s.begin(c, resource))
	if out.OK || out.Reason != leasefence.ReasonLockDelay || out.RetryAfter <= 0 || out.RetryAfter > s.LockDelay {
		s.t.Fatalf("Acquire(%q) by %s %s = %+v, want refused %q with a RetryAfter in (0, %v]", resource, c.Holder(), when, out, leasefence.ReasonLockDelay, s.LockDelay)
	}
	return out
}

func testLockDelayAfterExpiry(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	g := s.mustAcquire(a, "r")
	s.expire()
	s.wantLockDelay(b, "r", "just after a's lease expired")
	s.wantLockDelay(a, "r", "(the expired holder) in the delay")
	s.wantRenew(a, g.Token, leasefence.ReasonExpired)
	s.wantRelease(g.Token, leasefence.ReasonExpired)
	if hr, ok := s.Service.(leasefence.HolderReader); ok {
		if tok, held, err := hr.Holder(t.Context(), "r"); err != nil || held {
			t.Fatalf("Holder in the lock-delay = %v, %v, %v; want none", tok, held, err)
		}
	}
	s.Elapse(s.LockDelay / 2)
	// The expired holder's release did not end the delay.
	out := s.wantLockDelay(b, "r", "halfway through the delay")
	s.Elapse(out.RetryAfter + s.Settle)
	if again := s.mustAcquire(b, "r"); again.Token.Fence <= g.Token.Fence {
		t.Fatalf("fence %d after the delay, after %d", again.Token.Fence, g.Token.Fence)
	}
}

func testNoLockDelayAfterRelease(t tb, s *suite) {
	a, b := s.client("agent-a"), s.client("agent-b")
	for _, next := range []*leasefence.Client{b, a} {
		g := s.mustAcquire(a, "r")
		// A release the load delayed past the lease's end is refused and
		// starts the delay: nothing to judge then, as for any call made
		// while the holder counted on its lease.
		out := s.release(g.Token)
		s.whileHeld(g.Token, out.OK, fmt.Sprintf("Release = %+v", out), "OK")
		again := s.mustAcquire(next, "r")
		if again.Token.Fence <= g.Token.Fence {
			t.Fatalf("fence %d after the release of %d", again.Token.Fence, g.Token.Fence)
		}
		out = s.release(again.Token)
		s.whileHeld(again.Token, out.OK, fmt.Sprintf("Release = %+v", out), "OK")
	}
}

// TestLockDelayOption checks a coordinator's constructor on the lock-delay
// rule every coordinator shares (leasefence.ValidateLockDelay): newWith
// makes a coordinator with a LockDelay of delay and AllowLongLockDelay
// allowLong, and returns New's error. 0, a second and MaxLockDelay are
// accepted, and a week when allowed; a negative delay is refused naming
// option, allowed long or not, and so is one a second over MaxLockDelay
// when not allowed. Every delay it tries is whole seconds.
func TestLockDelayOption(t *testing.T, option string, newWith func(delay time.Duration, allowLong bool) error) {
	testLockDelayOption(t, option, newWith)
}

func testLockDelayOption(t testing.TB, option string, newWith func(delay time.Duration, allowLong bool) error) {
	t.Helper()
	week := 7 * leasefence.MaxLockDelay
	for _, tc := range []struct {
		delay     time.Duration
		allowLong bool
		wantErr   string // "" for accepted
	}{
		{0, false, ""},
		{time.Second, false, ""},
		{leasefence.MaxLockDelay, false, ""},
		{week, true, ""},
		{-time.Second, false, option + " must be >= 0"},
		{-time.Second, true, option + " must be >= 0"},
		{leasefence.MaxLockDelay + time.Second, false, option + " 24h0m1s is longer than MaxLockDelay"},
		{week, false, option + " 168h0m0s is longer than MaxLockDelay"},
	} {
		err := newWith(tc.delay, tc.allowLong)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s %v (AllowLongLockDelay %v): %v, want accepted", option, tc.delay, tc.allowLong, err)
		case tc.wantErr != "" && (!errors.Is(err, leasefence.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s %v (AllowLongLockDelay %v): %v, want ErrInvalidRequest saying %q", option, tc.delay, tc.allowLong, err, tc.wantErr)
		}
	}
}
