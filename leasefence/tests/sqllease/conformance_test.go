package sqllease_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/sqllease"
)

// TestConformance runs leasetest's suite on each backend. Calls go through
// two coordinators on two handles of one database, as two processes would:
// a retried request reaches the other one.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		leasetest.TestService(t, func(tb testing.TB) leasetest.Harness {
			opts := sqllease.Options{Table: "leases_" + tableSuffix(), TTL: testTTL}
			a := newCoordinator(tb, d.handle(tb), opts)
			b := newCoordinator(tb, d.handle(tb), opts)
			return leasetest.Harness{
				Service: alternate(a, b),
				TTL:     testTTL,
				Elapse:  time.Sleep,
				// The database dates the lease from the clock it reads in
				// the transaction, on this host: a few milliseconds.
				Settle: 20 * time.Millisecond,
			}
		})
	})
}
