package leasefence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// The lock-delay runs from the lease's expiry instant, to the nanosecond,
// whoever asks and however often: asking does not restart it, and neither
// does the expired holder's release.
func TestCoordinatorLockDelayScript(t *testing.T) {
	const delay = 5 * time.Second
	a1, b2, a3 := tok("r", "a", 1), tok("r", "b", 2), tok("r", "a", 3)
	steps := []cstep{
		acquire("1", "a", "r", granted("1", a1, ms(1000))),
		advance(ms(1000)), // a1 expires at 1000ms
		acquire("2", "b", "r", refused(leasefence.ReasonLockDelay, "", delay)),
		acquire("1", "a", "r", refused(leasefence.ReasonStaleRequest, "", 0)),
		acquire("3", "a", "r", refused(leasefence.ReasonLockDelay, "", delay)),
		renew("4", a1, renewRefused(leasefence.ReasonExpired)),
		release(a1, releaseRefused(leasefence.ReasonExpired)),
		advance(delay - 1),
		acquire("5", "b", "r", refused(leasefence.ReasonLockDelay, "", 1)),
		advance(1), // 1000ms + delay: over
		acquire("6", "b", "r", granted("6", b2, ms(7000))),
		release(b2, released),
		acquire("7", "a", "r", granted("7", a3, ms(7000))), // no delay after a release
		issued(3),
	}
	clock := leasefence.NewManualClock("coordinator")
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: testTTL, LockDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range steps {
		step(t, c, clock)
	}
}

func TestCoordinatorLockDelayOption(t *testing.T) {
	leasetest.TestLockDelayOption(t, "CoordinatorOptions.LockDelay", func(delay time.Duration, allowLong bool) error {
		_, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewManualClock("coordinator"), TTL: time.Second, LockDelay: delay, AllowLongLockDelay: allowLong})
		return err
	})
}

// Hold waits a lock-delay out, as it waits out a held lease, and TryHold
// says the resource is in its lock-delay and for how long.
func TestHoldWaitsOutALockDelay(t *testing.T) {
	const ttl, delay = 40 * time.Millisecond, 300 * time.Millisecond
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: ttl, LockDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	svc := leasefence.Local(coord)
	clock := leasefence.NewMonotonicClock("agents")
	a, b := newClient(t, clock, "a", 0), newClient(t, clock, "b", 0)
	req, err := a.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	out, err := svc.Acquire(t.Context(), req) // never renewed: it expires
	if err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	time.Sleep(ttl)
	_, err = leasefence.TryHold(t.Context(), svc, b, "r", leasefence.HoldOptions{})
	var held *leasefence.HeldError
	if !errors.As(err, &held) || held.HeldBy != "" || held.RetryAfter <= 0 || held.RetryAfter > delay || !strings.Contains(err.Error(), "lock-delay") {
		t.Fatalf("TryHold in the lock-delay = %v, want a *HeldError naming the lock-delay", err)
	}
	start := time.Now()
	s, err := leasefence.Hold(t.Context(), svc, b, "r", leasefence.HoldOptions{MaxWait: delay})
	if err != nil {
		t.Fatalf("Hold in the lock-delay = %v, want it waited out", err)
	}
	t.Cleanup(func() { _, _ = s.Release(t.Context()) })
	if waited := time.Since(start); waited < held.RetryAfter/2 {
		t.Fatalf("Hold was granted after %v, inside the lock-delay (%v left when TryHold asked)", waited, held.RetryAfter)
	}
	if s.Token().Fence <= out.Grant.Token.Fence {
		t.Fatalf("fence %d after %d", s.Token().Fence, out.Grant.Token.Fence)
	}
}
