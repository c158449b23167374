package sqllease_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/sqllease"
)

const testLockDelay = 1500 * time.Millisecond

// TestLockDelayConformance runs leasetest's lock-delay suite on each
// backend, through two coordinators on two handles of one database.
func TestLockDelayConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		leasetest.TestLockDelay(t, func(tb testing.TB) leasetest.Harness {
			opts := sqllease.Options{Table: "leases_" + tableSuffix(), TTL: testTTL, LockDelay: testLockDelay}
			return leasetest.Harness{
				Service:   alternate(newCoordinator(tb, d.handle(tb), opts), newCoordinator(tb, d.handle(tb), opts)),
				TTL:       testTTL,
				Elapse:    time.Sleep,
				Settle:    20 * time.Millisecond,
				LockDelay: testLockDelay,
			}
		})
	})
}

// The lock-delay is in the table: a coordinator made after the expiry, on
// a handle of its own (a process that restarted), refuses too.
func TestLockDelayOutlivesTheCoordinator(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		opts := sqllease.Options{Table: "leases_" + tableSuffix(), TTL: testTTL, LockDelay: testLockDelay}
		first := newCoordinator(t, d.handle(t), opts)
		a, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-a"), Holder: "agent-a"})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := a.BeginAcquire("r")
		if out, err := first.Acquire(t.Context(), req); err != nil || !out.OK {
			t.Fatalf("Acquire = %+v, %v", out, err)
		}
		time.Sleep(testTTL + 20*time.Millisecond)
		later := newCoordinator(t, d.handle(t), opts)
		req, _ = a.BeginAcquire("r")
		out, err := later.Acquire(t.Context(), req)
		if err != nil || out.OK || out.Reason != leasefence.ReasonLockDelay || out.RetryAfter <= 0 || out.RetryAfter > testLockDelay {
			t.Fatalf("Acquire by a coordinator made after the expiry = %+v, %v; want lock-delay", out, err)
		}
	})
}
