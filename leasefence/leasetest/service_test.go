package leasetest_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// The in-memory coordinator, on a manual clock, through Local.
func TestLocal(t *testing.T) {
	leasetest.TestService(t, func(t testing.TB) leasetest.Harness {
		clock := leasefence.NewManualClock("coordinator")
		const ttl = 3 * time.Second
		coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return leasetest.Harness{Service: leasefence.Local(coord), TTL: ttl, Elapse: clock.Advance}
	})
}

// The in-memory coordinator with a lock-delay, on a manual clock.
func TestLocalLockDelay(t *testing.T) {
	leasetest.TestLockDelay(t, func(t testing.TB) leasetest.Harness {
		clock := leasefence.NewManualClock("coordinator")
		const ttl, delay = 3 * time.Second, 10 * time.Second
		coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl, LockDelay: delay})
		if err != nil {
			t.Fatal(err)
		}
		return leasetest.Harness{Service: leasefence.Local(coord), TTL: ttl, Elapse: clock.Advance, LockDelay: delay}
	})
}
