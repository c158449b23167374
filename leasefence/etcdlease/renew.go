package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// Renew keeps the lease alive once (one etcd keep-alive) if t is the
// resource's current lease: its holder key exists with t's fence as its
// create revision and t's holder. The keep-alive is of the etcd lease that
// key is attached to, which belongs to this grant alone, so a stale token
// can never extend a newer holder's lease. The grant keeps the fence and
// reports the TTL etcd restarted the lease with.
//
// A renewal of a grant this coordinator made or renewed within the last
// TTL is one round trip (renewKnown); any other (a grant made elsewhere, or
// answered to a retried request) is three (renewRead), and remembered.
// A keep-alive a read's Raft term does not vouch for (keptAliveAtTerm) is
// no renewal: the error is ErrStaleKeepAlive, an unknown outcome, as when
// etcd does not answer.
func (c *Coordinator) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	if ctx == nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("%w: renew with a nil context", leasefence.ErrInvalidRequest)
	}
	if err := leasefence.ValidateRenew(req); err != nil {
		return leasefence.RenewOutcome{}, err
	}
	k, ok := keyOf(req.Token)
	if !ok {
		return leasefence.RenewOutcome{Reason: leasefence.ReasonUnknown}, nil
	}
	if lease, ok := c.recall(k); ok {
		return c.renewKnown(ctx, req, k, lease)
	}
	return c.renewRead(ctx, req, k)
}

// renewRead renews a grant whose etcd lease the coordinator does not know:
// it reads the holder key for it, keeps it alive, and reads the key again.
// The second read also vouches for the keep-alive's leader (keptAliveAtTerm).
func (c *Coordinator) renewRead(ctx context.Context, req leasefence.RenewRequest, k grantKey) (leasefence.RenewOutcome, error) {
	t := req.Token
	reason, hkv, _, err := c.classify(ctx, t)
	if err != nil || reason != "" {
		return leasefence.RenewOutcome{Reason: reason}, err
	}
	lease := clientv3.LeaseID(hkv.Lease)
	sent := time.Now()
	ka, err := c.cli.KeepAliveOnce(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return c.renewRefused(ctx, t)
	}
	if err != nil {
		return leasefence.RenewOutcome{}, err
	}
	// The holder key may have been deleted (released) between our read and
	// the keep-alive, which then extended a lease nothing is attached to:
	// harmless, but not a renewal. Read again to answer truthfully.
	reason, _, hdr, err := c.classify(ctx, t)
	if err != nil || reason != "" {
		return leasefence.RenewOutcome{Reason: reason}, err
	}
	if err := keptAliveAtTerm(ka.ResponseHeader, hdr); err != nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("etcdlease: renew %v: %w", t, err)
	}
	c.remember(k, lease, sent)
	return c.renewed(req, ka.TTL)
}

// renewKnown renews grant k, whose holder key the coordinator remembers is
// attached to etcd lease lease: it sends the keep-alive and a read of the
// holder key together, one round trip, and answers from both. The renewal
// holds when the keep-alive found the lease and the read found the key of
// t's fence and holder, attached to that lease.
//
// Why that is as safe as a read, the keep-alive and a read in sequence.
// The lease belongs to this grant alone, so the keep-alive extends no
// other grant's lease, whatever the read finds. If the keep-alive found
// the lease, the lease was never revoked or expired before it (etcd never
// resurrects one), and a key attached to a live lease is deleted only by a
// release of that key (or by Acquire withdrawing a grant it could not
// prove, which no holder was ever given); the read found the key, at its
// own instant before or after the keep-alive. So at the later of the two
// the key was still t's, unless the holder released it in between: a
// renewal racing the holder's own release may answer either way, as a
// renewal sent just before the release would. And the keep-alive restarted
// the lease after the request was sent, so etcd's expiry is not before the
// holder's deadline, as in renewRead, provided the lessor that answered was
// still the leader's: the read, linearizable and concurrent, must report a
// Raft term no higher than the keep-alive's (keptAliveAtTerm), or the
// renewal is not known to have happened. Being concurrent, the read may be
// linearized just before a leader change that the keep-alive came after:
// that window (one round trip) is not closed here, as it is in renewRead,
// whose read follows the keep-alive. When either answer is not that, the
// grant is forgotten and the keys say why.
func (c *Coordinator) renewKnown(ctx context.Context, req leasefence.RenewRequest, k grantKey, lease clientv3.LeaseID) (leasefence.RenewOutcome, error) {
	t := req.Token
	type keptAlive struct {
		resp *clientv3.LeaseKeepAliveResponse
		err  error
	}
	sent := time.Now()
	kept := make(chan keptAlive, 1)
	go func() {
		resp, err := c.cli.KeepAliveOnce(ctx, lease)
		kept <- keptAlive{resp, err}
	}()
	get, err := c.cli.Get(ctx, c.keys.holder(t.Resource))
	ka := <-kept
	switch {
	case err != nil:
		return leasefence.RenewOutcome{}, err
	case errors.Is(ka.err, rpctypes.ErrLeaseNotFound):
		c.forget(k)
		return c.renewRefused(ctx, t)
	case ka.err != nil:
		return leasefence.RenewOutcome{}, ka.err
	case len(get.Kvs) == 0:
		// Released while the lease lives on; the last-grant key says so.
		c.forget(k)
		reason, _, _, err := c.classify(ctx, t)
		if err != nil || reason != "" {
			return leasefence.RenewOutcome{Reason: reason}, err
		}
		return c.renewRead(ctx, req, k)
	}
	hkv := get.Kvs[0]
	if reason, err := judge(t, hkv, nil); err != nil || reason != "" {
		c.forget(k)
		return leasefence.RenewOutcome{Reason: reason}, err
	}
	if clientv3.LeaseID(hkv.Lease) != lease {
		// t's key on another lease than remembered: never written so, but
		// the key decides, not the memory.
		c.forget(k)
		return c.renewRead(ctx, req, k)
	}
	if err := keptAliveAtTerm(ka.resp.ResponseHeader, get.Header); err != nil {
		c.forget(k)
		return leasefence.RenewOutcome{}, fmt.Errorf("etcdlease: renew %v: %w", t, err)
	}
	c.remember(k, lease, sent)
	return c.renewed(req, ka.resp.TTL)
}

// renewed is the outcome of a renewal that etcd restarted with ttl seconds.
func (c *Coordinator) renewed(req leasefence.RenewRequest, ttl int64) (leasefence.RenewOutcome, error) {
	now, err := c.clock.Now()
	if err != nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("etcdlease: coordinator clock: %w", err)
	}
	d := time.Duration(ttl) * time.Second
	return leasefence.RenewOutcome{OK: true, Grant: leasefence.Grant{
		RequestID: req.RequestID, Token: req.Token, TTL: d, CoordinatorExpiresAt: now.Add(d),
	}}, nil
}

// renewRefused answers a renewal whose etcd lease is gone: expired, unless
// the keys say why more precisely.
func (c *Coordinator) renewRefused(ctx context.Context, t leasefence.Token) (leasefence.RenewOutcome, error) {
	reason, _, _, err := c.classify(ctx, t)
	if err != nil {
		return leasefence.RenewOutcome{}, err
	}
	if reason == "" {
		reason = leasefence.ReasonExpired // the key outlives its lease until etcd revokes it
	}
	return leasefence.RenewOutcome{Reason: reason}, nil
}

// Release deletes the holder key if, in the same transaction, its create
// revision is t's fence and its value t's holder: a stale token can never
// delete a newer holder's key. When the comparison fails, the same
// transaction reads the keys that say why: one round trip either way. The etcd lease is left to expire by itself (nothing is attached to
// it any more), which saves a write. Anything else answers with the same
// reasons as Renew.
func (c *Coordinator) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	if ctx == nil {
		return leasefence.ReleaseOutcome{}, fmt.Errorf("%w: release with a nil context", leasefence.ErrInvalidRequest)
	}
	if err := leasefence.ValidateToken(t); err != nil {
		return leasefence.ReleaseOutcome{}, err
	}
	k, ok := keyOf(t)
	if !ok {
		return leasefence.ReleaseOutcome{Reason: leasefence.ReasonUnknown}, nil
	}
	hk, lk := c.keys.holder(t.Resource), c.keys.last(t.Resource)
	resp, err := c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(hk), "=", k.fence),
		clientv3.Compare(clientv3.Value(hk), "=", t.Holder),
	).Then(
		clientv3.OpDelete(hk),
		clientv3.OpPut(lk, mustJSON(lastValue{Holder: t.Holder, Fence: k.fence, Released: true})),
		clientv3.OpDelete(c.keys.armed(t.Resource)), // released, not expired: no lock-delay
	).Else(clientv3.OpGet(hk), clientv3.OpGet(lk)).Commit()
	if err != nil {
		return leasefence.ReleaseOutcome{}, err
	}
	c.forget(k) // released now, or not this coordinator's live grant
	if resp.Succeeded {
		return leasefence.ReleaseOutcome{OK: true}, nil
	}
	// The keys in the same revision say why not.
	reason, err := judge(t, firstKV(resp, 0), firstKV(resp, 1))
	if err == nil && reason == "" {
		err = fmt.Errorf("etcdlease: release %v: the transaction's comparison failed on a key that matches it", t)
	}
	return leasefence.ReleaseOutcome{Reason: reason}, err
}

// classify reads the resource's keys and returns "" (with the holder key)
// when t is its current lease, and otherwise the reason it is not, with the
// header of its last (linearizable) read.
//
// It reads the holder key alone first: when the key exists, it alone
// decides (judge reads the last-grant key only when there is no holder
// key), which is every renewal of a live lease. Without it, both keys are
// read again in one revision, so that the reason comes from one state.
func (c *Coordinator) classify(ctx context.Context, t leasefence.Token) (leasefence.Reason, *mvccpb.KeyValue, *pb.ResponseHeader, error) {
	get, err := c.cli.Get(ctx, c.keys.holder(t.Resource))
	if err != nil {
		return "", nil, nil, err
	}
	if len(get.Kvs) > 0 {
		hkv := get.Kvs[0]
		reason, err := judge(t, hkv, nil)
		if reason != "" {
			hkv = nil
		}
		return reason, hkv, get.Header, err
	}
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(c.keys.holder(t.Resource)), clientv3.OpGet(c.keys.last(t.Resource))).Commit()
	if err != nil {
		return "", nil, nil, err
	}
	hkv := firstKV(resp, 0)
	reason, err := judge(t, hkv, firstKV(resp, 1))
	if reason != "" {
		hkv = nil
	}
	return reason, hkv, resp.Header, err
}

// judge returns "" when t is the lease of the holder key hkv, and otherwise
// the reason it is not, from hkv and the last-grant key lkv (either may be
// nil).
func judge(t leasefence.Token, hkv, lkv *mvccpb.KeyValue) (leasefence.Reason, error) {
	fence, ok := fenceInt64(t.Fence)
	if !ok {
		return leasefence.ReasonUnknown, nil
	}
	if hkv != nil {
		switch {
		case fence > hkv.CreateRevision:
			return leasefence.ReasonUnknown, nil
		case fence < hkv.CreateRevision:
			return leasefence.ReasonSuperseded, nil
		case t.Holder != string(hkv.Value):
			return leasefence.ReasonUnknown, nil
		}
		return "", nil
	}
	if lkv == nil {
		return leasefence.ReasonUnknown, nil
	}
	lv, err := decode[lastValue](lkv)
	if err != nil {
		return "", err
	}
	last := lv.Fence
	if last == 0 {
		last = lkv.ModRevision
	}
	switch {
	case fence > last:
		return leasefence.ReasonUnknown, nil
	case fence < last:
		return leasefence.ReasonSuperseded, nil
	case t.Holder != lv.Holder:
		return leasefence.ReasonUnknown, nil
	case lv.Released:
		return leasefence.ReasonReleased, nil
	}
	return leasefence.ReasonExpired, nil
}
