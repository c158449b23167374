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

// acquireAttempts bounds how often one Acquire grants a new etcd lease when
// the one it granted (or the replay lease) is gone before its transaction.
const acquireAttempts = 8

// Acquire grants a lease on a free resource: one etcd lease readied (see
// acquireLease), then one transaction that creates the holder key only if
// the resource is free and the request id unused, and otherwise reads, in
// the same revision, what the answer depends on. The fence is that
// transaction's revision. Anything but a fresh grant answers as
// leasefence.Coordinator does, and keeps the etcd lease readied for nothing
// as a spare for a later acquire.
//
// The lease comes first, optimistically, so that a free resource costs one
// keep-alive (no Raft write) and one transaction (one Raft write) when the
// coordinator has a spare lease, and a grant and the transaction (two Raft
// writes) when it has none. Spares are granted again in the background
// (refillSpares) once they run out.
//
// The error is non-nil when no answer was had (etcd unreachable, ctx done;
// ErrStaleKeepAlive when the grant's lease was kept alive only by a
// possibly replaced leader) or the request is malformed (leasefence.ErrInvalidRequest; an id that
// breaks the core's id rule is a *leasefence.IDError). After an
// error the request may have been granted: resend it (same RequestID) to be
// answered with that grant.
func (c *Coordinator) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	if ctx == nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("%w: acquire with a nil context", leasefence.ErrInvalidRequest)
	}
	if err := leasefence.ValidateAcquire(req); err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	hk, rk := c.keys.holder(req.Resource), c.keys.request(req.RequestID)
	for range acquireAttempts {
		lease, grantedTTL, sent, kept, err := c.acquireLease(ctx)
		if err != nil {
			return leasefence.AcquireOutcome{}, err
		}
		// Sent beside the transaction, the grants share its write batch.
		c.refillSpares()
		replay, err := c.replayLease(ctx)
		if err != nil {
			c.keepSpare(ctx, lease, sent)
			return leasefence.AcquireOutcome{}, err
		}
		resp, err := c.cli.Txn(ctx).If(append([]clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(hk), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(rk), "=", 0),
		}, c.lockDelayCmps(req.Resource)...)...).Then(
			clientv3.OpPut(hk, req.Holder, clientv3.WithLease(lease)),
			clientv3.OpPut(rk, mustJSON(requestValue{Holder: req.Holder, Resource: req.Resource, TTL: grantedTTL}), clientv3.WithLease(replay)),
			clientv3.OpPut(c.keys.last(req.Resource), mustJSON(lastValue{Holder: req.Holder})),
			c.armOp(req.Resource, req.Holder),
		).Else(
			clientv3.OpGet(hk), clientv3.OpGet(rk), clientv3.OpGet(c.keys.armed(req.Resource)), clientv3.OpGet(c.keys.delay(req.Resource)),
		).Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			// The replay lease was revoked behind our back, or the new
			// lease expired before we could use it: get fresh ones.
			c.forgetReplayLease(replay)
			continue
		case err != nil:
			// No answer: the transaction may have committed, so the lease
			// is not ours to reuse or revoke. A retry of the request finds
			// out.
			return leasefence.AcquireOutcome{}, err
		case resp.Succeeded:
			now, err := c.clock.Now()
			if err != nil {
				return leasefence.AcquireOutcome{}, fmt.Errorf("etcdlease: coordinator clock: %w", err)
			}
			ttl := time.Duration(grantedTTL) * time.Second
			expires := now.Add(ttl)
			token := leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: leasefence.Fence(resp.Header.Revision)}
			k := grantKey{resource: req.Resource, holder: req.Holder, fence: resp.Header.Revision}
			if kept != nil && keptAliveAtTerm(kept, resp.Header) != nil {
				ttl, expires, err = c.restartGranted(ctx, req, token, k)
				if err != nil {
					return leasefence.AcquireOutcome{}, err
				}
			} else {
				c.remember(k, lease, sent)
			}
			proof, err := c.grantProof(ctx, token, req.RequestID, requestValue{Holder: req.Holder, Resource: req.Resource, TTL: grantedTTL}, resp.Header.Revision, replay)
			if err != nil {
				return leasefence.AcquireOutcome{}, err
			}
			return leasefence.AcquireOutcome{OK: true, Grant: leasefence.Grant{
				RequestID:            req.RequestID,
				Token:                token,
				TTL:                  ttl,
				CoordinatorExpiresAt: expires,
				Proof:                proof,
			}}, nil
		}
		// The comparison failed, so the transaction wrote nothing: the
		// lease has nothing attached and can serve a later acquire.
		c.keepSpare(ctx, lease, sent)
		// A failed comparison means the holder key, the request record or
		// a lock-delay's key exists, and the Else branch read them all in
		// that revision.
		hkv, rkv := firstKV(resp, 0), firstKV(resp, 1)
		if rkv != nil || hkv != nil {
			return c.answer(ctx, req, hkv, rkv)
		}
		out, err := c.lockDelay(ctx, req.Resource, firstKV(resp, 2), firstKV(resp, 3))
		if errors.Is(err, errRaced) {
			continue
		}
		return out, err
	}
	return leasefence.AcquireOutcome{}, fmt.Errorf("etcdlease: acquire %q: no usable lease after %d grants", req.Resource, acquireAttempts)
}

// restartGranted dates grant token, just written on a spare lease whose
// keep-alive the transaction's Raft term does not vouch for
// (keptAliveAtTerm), from a renewal of it instead: that keep-alive may have
// come from a replaced leader, so its TTL is not the grant's. The
// transaction has committed, so the grant cannot be withdrawn unseen; a
// renewal sent now, confirmed by the read after it, restarts the lease
// after the holder sent its acquire, so the holder's deadline holds again.
// Without one, the error says the outcome is unknown: a retried request is
// answered from the keys (answer), with the lease's remaining TTL.
func (c *Coordinator) restartGranted(ctx context.Context, req leasefence.AcquireRequest, token leasefence.Token, k grantKey) (time.Duration, leasefence.Instant, error) {
	out, err := c.renewRead(ctx, leasefence.RenewRequest{RequestID: req.RequestID, Token: token}, k)
	switch {
	case err != nil:
		return 0, leasefence.Instant{}, err
	case !out.OK:
		return 0, leasefence.Instant{}, fmt.Errorf("%w: acquire %q: granted on a spare lease, then not renewed: %s", ErrStaleKeepAlive, req.Resource, out.Reason)
	}
	return out.Grant.TTL, out.Grant.CoordinatorExpiresAt, nil
}

// answer decides an acquire the transaction refused, from the holder key and
// the request record it read.
func (c *Coordinator) answer(ctx context.Context, req leasefence.AcquireRequest, hkv, rkv *mvccpb.KeyValue) (out leasefence.AcquireOutcome, err error) {
	if rkv != nil {
		rv, err := decode[requestValue](rkv)
		if err != nil {
			return out, err
		}
		if rv.Holder != req.Holder || rv.Resource != req.Resource {
			return leasefence.AcquireOutcome{Reason: leasefence.ReasonRequestConflict}, nil
		}
		if hkv == nil || hkv.CreateRevision != rkv.CreateRevision {
			return leasefence.AcquireOutcome{Reason: leasefence.ReasonStaleRequest}, nil
		}
		// The key exists, so the lease is live, or expired within the last
		// half second and not yet revoked: the holder's own deadline, dated
		// from the first send, has passed by then, so replaying is safe.
		left, _, err := c.remaining(ctx, clientv3.LeaseID(hkv.Lease))
		if err != nil {
			return out, err
		}
		now, err := c.clock.Now()
		if err != nil {
			return out, fmt.Errorf("etcdlease: coordinator clock: %w", err)
		}
		token := leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: leasefence.Fence(hkv.CreateRevision)}
		proof, err := c.grantProof(ctx, token, req.RequestID, rv, rkv.ModRevision, clientv3.LeaseID(rkv.Lease))
		if err != nil {
			return out, err
		}
		return leasefence.AcquireOutcome{OK: true, Grant: leasefence.Grant{
			RequestID:            req.RequestID,
			Token:                token,
			TTL:                  time.Duration(rv.TTL) * time.Second,
			CoordinatorExpiresAt: now.Add(max(left, 0)),
			Proof:                proof,
		}}, nil
	}
	if hkv == nil {
		return out, fmt.Errorf("etcdlease: acquire %q: the transaction was refused, yet the resource is free and the request id unused", req.Resource)
	}
	holder := string(hkv.Value)
	reason := leasefence.ReasonHeld
	if holder == req.Holder {
		reason = leasefence.ReasonAlreadyHeld
	}
	left, granted, err := c.remaining(ctx, clientv3.LeaseID(hkv.Lease))
	if err != nil {
		return out, err
	}
	// etcd reports whole seconds, truncated (0 also for a lease expired
	// less than a second ago, not yet revoked): one more is an upper bound,
	// never 0. No wait is longer than the granted TTL, unless a leader
	// change restarted the lease.
	retry := min(max(left, 0)+time.Second, max(granted, time.Second))
	return leasefence.AcquireOutcome{Reason: reason, HeldBy: holder, RetryAfter: retry}, nil
}

// remaining is the lease's remaining TTL as etcd reports it: whole seconds,
// truncated, so 0 for the last second and for a lease expired but not yet
// revoked; negative (or 0) once it is gone. granted is the TTL etcd granted
// it.
func (c *Coordinator) remaining(ctx context.Context, id clientv3.LeaseID) (left, granted time.Duration, err error) {
	ttl, err := c.cli.TimeToLive(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(ttl.TTL) * time.Second, time.Duration(ttl.GrantedTTL) * time.Second, nil
}
