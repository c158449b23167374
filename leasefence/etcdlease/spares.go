package etcdlease

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// spareLeases is the most leases a coordinator grants ahead, together, when
// it has none left: their grants share the member's write batches, so
// back-to-back acquires pay about one Raft round for several leases. A
// coordinator whose spares age unused grants one at a time, so sparse
// acquires waste at most one lease each (it expires with nothing attached).
const spareLeases = 4

// refillTimeout bounds the background grants of spare leases; Close, or the
// client's Close, ends them sooner.
const refillTimeout = 10 * time.Second

// spareLease is a lease granted ahead, and when the request that last
// started its TTL (its grant or a keep-alive) was sent.
type spareLease struct {
	id   clientv3.LeaseID
	sent time.Time
}

// acquireLease returns an etcd lease, with nothing attached, for the
// acquire's transaction, the TTL etcd granted it, when the request that
// started that TTL was sent, and the keep-alive's header when it is a
// spare restarted by a keep-alive (nil for a lease granted now).
//
// Why a spare is as safe as a lease granted now. The holder dates its
// lease from the instant it sent the request: its deadline is sentAt + TTL
// (less its skew budget), and the coordinator's expiry must never come
// before it. A keep-alive restarts the lease at its full granted TTL when
// the leader's lessor handles it (lessor.Renew refreshes the expiry to
// now + TTL in memory, with no Raft entry unless lease checkpointing has
// recorded a remaining TTL for it), and that happens after this
// call began, so after the request was sent: the expiry is at or after
// sentAt + TTL, exactly as for a grant made now. The TTL is the lease's
// granted TTL (the keep-alive reports it), which is what a grant would
// report, provided the lessor that answered was the leader's: a leader
// paused and replaced answers keep-alives from its own lessor once resumed,
// while the new leader expires the lease on its own schedule. So Acquire
// trusts the keep-alive only when its transaction, linearizable and after
// it, reports no higher Raft term (keptAliveAtTerm, which says why and what
// it cannot see); otherwise it dates the grant from a confirmed renewal
// (restartGranted). The rest is as for a fresh grant:
//   - A spare that expired or was revoked cannot be kept alive (etcd
//     answers LeaseNotFound, after waiting out a pending revocation, and
//     never resurrects it): a fresh lease is granted instead. If it expires
//     between the keep-alive and the transaction (a full TTL later), the
//     transaction fails with LeaseNotFound and Acquire starts again.
//   - A spare belongs to one acquire: it is taken out of the coordinator
//     under its mutex before use, and only a transaction that wrote nothing
//     gives it back, so one etcd lease never carries two grants (which
//     would let one holder's renewal extend the other's).
//   - An unused spare carries no key: when it expires, nothing is freed.
//   - A leader change restarts every lease at its full TTL, at the new
//     leader's election: that alone shortens no lease, but it does not make
//     a keep-alive answered by the replaced leader count (above).
func (c *Coordinator) acquireLease(ctx context.Context) (clientv3.LeaseID, int64, time.Time, *pb.ResponseHeader, error) {
	if spare, ok := c.takeSpare(); ok {
		sent := time.Now()
		ka, err := c.cli.KeepAliveOnce(ctx, spare)
		switch {
		case err == nil:
			return spare, ka.TTL, sent, ka.ResponseHeader, nil
		case !errors.Is(err, rpctypes.ErrLeaseNotFound):
			// Whether the keep-alive arrived is unknown; the spare carries
			// nothing, so it is dropped and left to expire.
			return 0, 0, time.Time{}, nil, err
		}
		// The others are no younger: drop them too.
		c.dropSpares()
	}
	sent := time.Now()
	g, err := c.cli.Grant(ctx, c.ttl)
	if err != nil {
		return 0, 0, time.Time{}, nil, err
	}
	return g.ID, g.TTL, sent, nil, nil
}

// takeSpare removes the youngest spare lease from the coordinator and
// returns it, unless it has none that was started less than half a TTL ago
// (older ones are dropped: a keep-alive of one that expired waits for its
// revocation, so trying it would only slow the acquire down). Which spare
// is tried is a matter of speed only; the keep-alive decides whether it is
// usable.
func (c *Coordinator) takeSpare() (clientv3.LeaseID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.spares)
	if n == 0 {
		return 0, false
	}
	s := c.spares[n-1]
	if time.Since(s.sent) >= time.Duration(c.ttl)*time.Second/2 {
		c.spares = c.spares[:0]
		c.burst = 1
		return 0, false
	}
	c.spares = c.spares[:n-1]
	c.burst = min(2*max(c.burst, 1), spareLeases)
	return s.id, true
}

func (c *Coordinator) dropSpares() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spares = c.spares[:0]
}

// keepSpare makes lease, which has nothing attached and whose TTL was last
// started by a request sent at sent, a spare, or revokes it (best effort:
// left alone it would expire by itself) when the coordinator has enough.
func (c *Coordinator) keepSpare(ctx context.Context, lease clientv3.LeaseID, sent time.Time) {
	c.mu.Lock()
	kept := len(c.spares) < spareLeases && !c.closed
	if kept {
		c.spares = append(c.spares, spareLease{id: lease, sent: sent})
	}
	c.mu.Unlock()
	if !kept {
		_, _ = c.cli.Revoke(ctx, lease)
	}
}

// refillSpares grants c.burst leases in the background, together, when
// the coordinator has no spare left, no grant for one is under way and it
// is not closed. The grants are the coordinator's, not the caller's: they
// carry none of its context, and are bounded by refillTimeout and by the
// coordinator's life (Close, the client's Close); an error only means a
// later acquire grants its own lease.
func (c *Coordinator) refillSpares() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.spares) != 0 || c.refilling || c.closed {
		return
	}
	c.refilling = true
	burst := max(c.burst, 1)
	// Added under mu, before closed can be set: Close's Wait sees it.
	c.working.Add(1)
	go func() {
		defer c.working.Done()
		ctx, cancel := context.WithTimeout(c.life, refillTimeout)
		defer cancel()
		granted := make([]spareLease, burst)
		var wg sync.WaitGroup
		for i := range granted {
			wg.Go(func() {
				sent := time.Now()
				if g, err := c.cli.Grant(ctx, c.ttl); err == nil {
					granted[i] = spareLease{id: g.ID, sent: sent}
				}
			})
		}
		wg.Wait()
		// The leases and the end of the refill become visible together,
		// so an acquire that empties the pool always starts the next one.
		var excess []clientv3.LeaseID
		c.mu.Lock()
		c.refilling = false
		for _, g := range granted {
			switch {
			case g.id == 0:
			case len(c.spares) < spareLeases && !c.closed:
				c.spares = append(c.spares, g)
			default: // refused acquires gave theirs back meanwhile
				excess = append(excess, g.id)
			}
		}
		c.mu.Unlock()
		for _, id := range excess {
			_, _ = c.cli.Revoke(ctx, id)
		}
	}()
}

// SpareLeases are the etcd leases the coordinator has granted ahead for its
// next acquires, oldest first: none of them carries a key. It is for
// diagnostics and tests, which watch the spares from outside the package.
func (c *Coordinator) SpareLeases() []clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]clientv3.LeaseID, len(c.spares))
	for i, s := range c.spares {
		ids[i] = s.id
	}
	return ids
}
