package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// The lock-delay (Options.LockDelay) on etcd.
//
// etcd ends a lease by deleting the keys attached to it, and a release
// deletes the holder key too: the holder key's absence cannot tell an
// expiry from a release, and etcd records no time of either. So a grant
// made with a lock-delay also writes an armed key, <prefix>armed/<resource>,
// on no lease, and a release deletes it in the transaction that deletes the
// holder key. A holder key gone while its armed key remains is a lease
// that expired: the armed key is deleted only by a release, or by the
// acquire that finds the expiry.
//
// That acquire's transaction fails on the armed key and reads it; a second
// transaction then deletes it and writes the delay key,
// <prefix>delay/<resource>, on an etcd lease of LockDelay, if (compared in
// that transaction) the holder key is still absent and the armed key
// unchanged. The detection and the delay key are one atomic step, made once
// per expiry: every later acquire, by any coordinator on the prefix or one
// started after it, fails on the delay key and answers "lock-delay" with
// its lease's remaining TTL, until etcd deletes it with its lease.
//
// Why from the detection and not from the expiry. The alternatives that
// start it at the expiry keep a key alive for TTL + LockDelay beside the
// holder's: on the holder key's own lease (a live lease then has to be told
// from a delayed one by its remaining TTL, which etcd reports in truncated
// seconds, and a renewal's keep-alive cannot be made conditional on it, so
// a renewal racing the expiry would resurrect the lease), or on a second
// lease kept alive with every renewal (two keep-alives are not atomic: a
// renewal whose second one is lost leaves the delay shorter than the lease,
// and none at all). Counting from the first acquire after the expiry never
// makes the delay shorter than LockDelay after the expiry, which is what
// it is for; what it costs is availability: a resource whose holder died
// long before anyone asked for it is still refused for LockDelay then.
//
// The delay key is honoured by every coordinator on the prefix, also one
// without a LockDelay of its own; only a coordinator with one arms its
// grants (one without deletes the armed key it finds when it grants), so
// the delay of the coordinator that finds the expiry is the one that runs.
// A lease past its expiry whose revocation etcd has not yet applied can
// still be released (see the package doc): that release deletes the armed
// key, and no delay follows.

func (k keys) armed(resource string) string { return k.prefix + "armed/" + resource }
func (k keys) delay(resource string) string { return k.prefix + "delay/" + resource }

// errRaced: the keys an acquire read changed before it could act on them;
// the acquire starts again.
var errRaced = errors.New("etcdlease: raced")

// lockDelayCmps are the comparisons a grant adds for the lock-delay: no
// delay key, always; and no armed key (an expiry nobody has found yet) for
// a coordinator with a lock-delay.
func (c *Coordinator) lockDelayCmps(resource string) []clientv3.Cmp {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(c.keys.delay(resource)), "=", 0)}
	if c.delay > 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.keys.armed(resource)), "=", 0))
	}
	return cmps
}

// armOp is a grant's write of the armed key: with a lock-delay, the key
// (its value the holder, for operators); without, its deletion.
func (c *Coordinator) armOp(resource, holder string) clientv3.Op {
	if c.delay > 0 {
		return clientv3.OpPut(c.keys.armed(resource), holder)
	}
	return clientv3.OpDelete(c.keys.armed(resource))
}

// lockDelay answers an acquire whose grant failed on the lock-delay's keys
// alone (no holder key, no request record), from the armed key akv and
// the delay key dkv read in that revision: "lock-delay" with the rest of a
// running delay, or, for an expiry not yet found, the delay started and
// its whole length. errRaced when another acquire or release got there
// first.
func (c *Coordinator) lockDelay(ctx context.Context, resource string, akv, dkv *mvccpb.KeyValue) (leasefence.AcquireOutcome, error) {
	if dkv != nil {
		left, granted, err := c.remaining(ctx, clientv3.LeaseID(dkv.Lease))
		if err != nil {
			return leasefence.AcquireOutcome{}, err
		}
		// Whole seconds, truncated, as for "held": one more is an upper
		// bound, never 0 while the key is there.
		retry := min(max(left, 0)+time.Second, max(granted, time.Second))
		return leasefence.AcquireOutcome{Reason: leasefence.ReasonLockDelay, RetryAfter: retry}, nil
	}
	if akv == nil || c.delay == 0 {
		return leasefence.AcquireOutcome{}, fmt.Errorf("etcdlease: acquire %q: the transaction was refused, yet the resource is free and the request id unused", resource)
	}
	g, err := c.cli.Grant(ctx, c.delay)
	if err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	ak := c.keys.armed(resource)
	resp, err := c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(c.keys.holder(resource)), "=", 0),
		clientv3.Compare(clientv3.ModRevision(ak), "=", akv.ModRevision),
	).Then(
		clientv3.OpDelete(ak),
		clientv3.OpPut(c.keys.delay(resource), string(akv.Value), clientv3.WithLease(g.ID)),
	).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return leasefence.AcquireOutcome{}, errRaced // the delay's lease ran out before its transaction
	case err != nil:
		return leasefence.AcquireOutcome{}, err
	case !resp.Succeeded:
		// Nothing is attached to the lease: it expires by itself.
		return leasefence.AcquireOutcome{}, errRaced
	}
	return leasefence.AcquireOutcome{Reason: leasefence.ReasonLockDelay, RetryAfter: time.Duration(g.TTL) * time.Second}, nil
}
