package sqllease_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/sqllease"
)

// conformanceTTL is far above the time the suite's calls take: under the
// race detector on two loaded cores (load average 20-30) one acquire took
// up to a second with eight acquirers contending on SQLite, and a 300ms
// TTL ended leases between a grant and the check that it is held. The
// suite skips what the load outran, so a TTL near those times would judge
// little; each expiry it waits for costs one TTL.
const conformanceTTL = 2 * time.Second

// TestConformance runs leasetest's suite on each backend. Calls go through
// two coordinators on two handles of one database, as two processes would:
// a retried request reaches the other one.
func TestConformance(t *testing.T) {
	forEachBackendParallel(t, func(t *testing.T, d database) {
		leasetest.TestService(t, func(tb testing.TB) leasetest.Harness {
			opts := sqllease.Options{Table: "leases_" + tableSuffix(), TTL: conformanceTTL}
			a := newCoordinator(tb, d.handle(tb), opts)
			b := newCoordinator(tb, d.handle(tb), opts)
			return leasetest.Harness{
				Service: alternate(a, b),
				TTL:     conformanceTTL,
				Elapse:  time.Sleep,
				// The database dates the lease from the clock it reads in
				// the transaction, on this host: a few milliseconds.
				Settle: 20 * time.Millisecond,
			}
		})
	})
}
