package etcdlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty and for a
// Gate without WithPrefix.
const DefaultPrefix = "/leasefence/"

// DefaultReplayWindow is Options.ReplayWindow when 0.
const DefaultReplayWindow = 10 * time.Minute

// acquireAttempts bounds how often one Acquire grants a new etcd lease when
// the one it granted (or the replay lease) is gone before its transaction.
const acquireAttempts = 8

// spareLeases is the most leases a coordinator grants ahead, together, when
// it has none left: their grants share the member's write batches, so
// back-to-back acquires pay about one Raft round for several leases. A
// coordinator whose spares age unused grants one at a time, so sparse
// acquires waste at most one lease each (it expires with nothing attached).
const spareLeases = 4

// refillTimeout bounds the background grants of spare leases.
const refillTimeout = 10 * time.Second

// Options configures a Coordinator.
type Options struct {
	// Prefix is prepended to every key the coordinator writes; default
	// DefaultPrefix. Coordinators (and gates) that share a prefix share
	// leases.
	Prefix string
	// TTL is the lease duration asked of etcd: whole seconds, >= 1s. A Grant
	// reports the TTL etcd granted, which is higher if the server's minimum
	// is.
	TTL time.Duration
	// Clock stamps Grant.CoordinatorExpiresAt, which is for logs only;
	// default a monotonic clock of domain "etcd".
	Clock leasefence.Clock
	// ReplayWindow is how long an acquire's request id is remembered for
	// retries: at least this long, at most twice it. 0 means
	// DefaultReplayWindow; otherwise whole seconds, >= 1s. A retry after the
	// window is a fresh acquisition, like a retry evicted from the in-memory
	// coordinator's replay cache.
	ReplayWindow time.Duration
}

// Coordinator is a leasefence.Service on etcd. It is safe for concurrent
// use, and any number of Coordinators (in any number of processes) may share
// one etcd cluster and prefix: every decision is an etcd transaction.
type Coordinator struct {
	cli    *clientv3.Client
	keys   keys
	ttl    int64 // seconds
	clock  leasefence.Clock
	window time.Duration

	mu       sync.Mutex
	replay   clientv3.LeaseID // the lease request records are attached to
	replayAt time.Time        // when it was granted
	// spares are etcd leases granted ahead for the next acquires, with
	// nothing attached, in the order they were kept; refilling is true while grants for
	// them are under way. See acquireLease for why using one is safe.
	spares    []spareLease
	refilling bool
	burst     int // leases the next refill grants: 1 to spareLeases
}

// spareLease is a lease granted ahead, and when the request that last
// started its TTL (its grant or a keep-alive) was sent.
type spareLease struct {
	id   clientv3.LeaseID
	sent time.Time
}

var _ leasefence.Service = (*Coordinator)(nil)

// New returns a coordinator on cli, or an error wrapping
// leasefence.ErrInvalidRequest when an option is out of range.
func New(cli *clientv3.Client, opts Options) (*Coordinator, error) {
	switch {
	case cli == nil:
		return nil, fmt.Errorf("%w: etcdlease.New with a nil client", leasefence.ErrInvalidRequest)
	case opts.TTL < time.Second || opts.TTL%time.Second != 0:
		return nil, fmt.Errorf("%w: Options.TTL must be whole seconds >= 1s, got %v", leasefence.ErrInvalidRequest, opts.TTL)
	case opts.ReplayWindow < 0 || opts.ReplayWindow%time.Second != 0 || (opts.ReplayWindow > 0 && opts.ReplayWindow < time.Second):
		return nil, fmt.Errorf("%w: Options.ReplayWindow must be 0 or whole seconds >= 1s, got %v", leasefence.ErrInvalidRequest, opts.ReplayWindow)
	}
	clock := opts.Clock
	if clock == nil {
		clock = leasefence.NewMonotonicClock("etcd")
	}
	window := opts.ReplayWindow
	if window == 0 {
		window = DefaultReplayWindow
	}
	return &Coordinator{
		cli:    cli,
		keys:   keys{prefix: prefixOr(opts.Prefix)},
		ttl:    int64(opts.TTL / time.Second),
		clock:  clock,
		window: window,
	}, nil
}

func prefixOr(p string) string {
	if p == "" {
		return DefaultPrefix
	}
	return p
}

// keys names the coordinator's keys under its prefix.
type keys struct{ prefix string }

// holder is the live lease on a resource: created by the acquire that
// granted it (its create revision is the fence), attached to that grant's
// etcd lease, so it disappears when the lease expires. Its value is the
// holder's name, bare, so that a transaction can compare on it.
func (k keys) holder(resource string) string { return k.prefix + "holders/" + resource }

// last is the latest grant on a resource, kept after the lease ends, so
// that renew and release can tell released, expired and superseded apart.
func (k keys) last(resource string) string { return k.prefix + "last/" + resource }

// request is an acquire's request id, created in the same transaction as
// the holder key (so with the same create revision), for retries.
func (k keys) request(id string) string { return k.prefix + "requests/" + id }

type lastValue struct {
	Holder string `json:"holder"`
	// Fence is 0 while the grant that wrote the key is the latest: the
	// key's mod revision is then the fence. A release writes the fence.
	Fence    int64 `json:"fence,omitempty"`
	Released bool  `json:"released,omitempty"`
}

type requestValue struct {
	Holder   string `json:"holder"`
	Resource string `json:"resource"`
	TTL      int64  `json:"ttlSeconds"` // as granted by etcd
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and ints always marshal
	}
	return string(b)
}

func decode[T any](kv *mvccpb.KeyValue) (T, error) {
	var v T
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return v, fmt.Errorf("%w: %s: %w", ErrCorruptKey, kv.Key, err)
	}
	return v, nil
}

// firstKV returns the single key a Get in a transaction found, or nil.
func firstKV(r *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	kvs := r.Responses[i].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

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
// The error is non-nil when no answer was had (etcd unreachable, ctx done)
// or the request is malformed (leasefence.ErrInvalidRequest). After an
// error the request may have been granted: resend it (same RequestID) to be
// answered with that grant.
func (c *Coordinator) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	if ctx == nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("%w: acquire with a nil context", leasefence.ErrInvalidRequest)
	}
	if req.RequestID == "" || req.Holder == "" || req.Resource == "" {
		return leasefence.AcquireOutcome{}, fmt.Errorf("%w: acquire request %+v lacks a request id, holder or resource", leasefence.ErrInvalidRequest, req)
	}
	hk, rk := c.keys.holder(req.Resource), c.keys.request(req.RequestID)
	for range acquireAttempts {
		lease, grantedTTL, sent, err := c.acquireLease(ctx)
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
		resp, err := c.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(hk), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(rk), "=", 0),
		).Then(
			clientv3.OpPut(hk, req.Holder, clientv3.WithLease(lease)),
			clientv3.OpPut(rk, mustJSON(requestValue{Holder: req.Holder, Resource: req.Resource, TTL: grantedTTL}), clientv3.WithLease(replay)),
			clientv3.OpPut(c.keys.last(req.Resource), mustJSON(lastValue{Holder: req.Holder})),
		).Else(clientv3.OpGet(hk), clientv3.OpGet(rk)).Commit()
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
			return leasefence.AcquireOutcome{OK: true, Grant: leasefence.Grant{
				RequestID:            req.RequestID,
				Token:                leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: leasefence.Fence(resp.Header.Revision)},
				TTL:                  ttl,
				CoordinatorExpiresAt: now.Add(ttl),
			}}, nil
		}
		// The comparison failed, so the transaction wrote nothing: the
		// lease has nothing attached and can serve a later acquire.
		c.keepSpare(ctx, lease, sent)
		// A failed comparison means the holder key or the request record
		// exists, and the Else branch read both in that revision.
		return c.answer(ctx, req, firstKV(resp, 0), firstKV(resp, 1))
	}
	return leasefence.AcquireOutcome{}, fmt.Errorf("etcdlease: acquire %q: no usable lease after %d grants", req.Resource, acquireAttempts)
}

// acquireLease returns an etcd lease, with nothing attached, for the
// acquire's transaction, the TTL etcd granted it, and when the request that
// started that TTL was sent: a spare, restarted by a keep-alive, or else a
// lease granted now.
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
// report. The rest is as for a fresh grant:
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
//   - A leader change restarts every lease at its full TTL: a spare, or a
//     lease in use, only gets longer.
func (c *Coordinator) acquireLease(ctx context.Context) (clientv3.LeaseID, int64, time.Time, error) {
	if spare, ok := c.takeSpare(); ok {
		sent := time.Now()
		ka, err := c.cli.KeepAliveOnce(ctx, spare)
		switch {
		case err == nil:
			return spare, ka.TTL, sent, nil
		case !errors.Is(err, rpctypes.ErrLeaseNotFound):
			// Whether the keep-alive arrived is unknown; the spare carries
			// nothing, so it is dropped and left to expire.
			return 0, 0, time.Time{}, err
		}
		// The others are no younger: drop them too.
		c.dropSpares()
	}
	sent := time.Now()
	g, err := c.cli.Grant(ctx, c.ttl)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	return g.ID, g.TTL, sent, nil
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
	kept := len(c.spares) < spareLeases
	if kept {
		c.spares = append(c.spares, spareLease{id: lease, sent: sent})
	}
	c.mu.Unlock()
	if !kept {
		_, _ = c.cli.Revoke(ctx, lease)
	}
}

// refillSpares grants c.burst leases in the background, together, when
// the coordinator has no spare left and no grant for one is under way. The
// grants are the coordinator's, not the caller's: they carry none of its
// context and are bounded by refillTimeout; an error only means a later
// acquire grants its own lease.
func (c *Coordinator) refillSpares() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.spares) != 0 || c.refilling {
		return
	}
	c.refilling = true
	burst := max(c.burst, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), refillTimeout)
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
			case len(c.spares) < spareLeases:
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
		return leasefence.AcquireOutcome{OK: true, Grant: leasefence.Grant{
			RequestID:            req.RequestID,
			Token:                leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: leasefence.Fence(hkv.CreateRevision)},
			TTL:                  time.Duration(rv.TTL) * time.Second,
			CoordinatorExpiresAt: now.Add(max(left, 0)),
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

// replayLease returns the lease request records are attached to, granting a
// new one (for twice the replay window) once the current one is a window
// old: each record lives between one and two windows.
func (c *Coordinator) replayLease(ctx context.Context) (clientv3.LeaseID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replay != 0 && time.Since(c.replayAt) < c.window {
		return c.replay, nil
	}
	g, err := c.cli.Grant(ctx, int64(2*c.window/time.Second))
	if err != nil {
		return 0, err
	}
	c.replay, c.replayAt = g.ID, time.Now()
	return c.replay, nil
}

func (c *Coordinator) forgetReplayLease(id clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replay == id {
		c.replay = 0
	}
}

// Renew keeps the lease alive once (one etcd keep-alive) if t is the
// resource's current lease: its holder key exists with t's fence as its
// create revision and t's holder. The keep-alive is of the etcd lease that
// key is attached to, which belongs to this grant alone, so a stale token
// can never extend a newer holder's lease. The grant keeps the fence and
// reports the TTL etcd restarted the lease with.
func (c *Coordinator) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	if ctx == nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("%w: renew with a nil context", leasefence.ErrInvalidRequest)
	}
	if req.RequestID == "" {
		return leasefence.RenewOutcome{}, fmt.Errorf("%w: renew request has no request id", leasefence.ErrInvalidRequest)
	}
	if err := validToken(req.Token); err != nil {
		return leasefence.RenewOutcome{}, err
	}
	t := req.Token
	reason, hkv, err := c.classify(ctx, t)
	if err != nil || reason != "" {
		return leasefence.RenewOutcome{Reason: reason}, err
	}
	ka, err := c.cli.KeepAliveOnce(ctx, clientv3.LeaseID(hkv.Lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return c.renewRefused(ctx, t)
	}
	if err != nil {
		return leasefence.RenewOutcome{}, err
	}
	// The holder key may have been deleted (released) between our read and
	// the keep-alive, which then extended a lease nothing is attached to:
	// harmless, but not a renewal. Read again to answer truthfully.
	reason, _, err = c.classify(ctx, t)
	if err != nil || reason != "" {
		return leasefence.RenewOutcome{Reason: reason}, err
	}
	now, err := c.clock.Now()
	if err != nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("etcdlease: coordinator clock: %w", err)
	}
	ttl := time.Duration(ka.TTL) * time.Second
	return leasefence.RenewOutcome{OK: true, Grant: leasefence.Grant{
		RequestID: req.RequestID, Token: t, TTL: ttl, CoordinatorExpiresAt: now.Add(ttl),
	}}, nil
}

// renewRefused answers a renewal whose etcd lease is gone: expired, unless
// the keys say why more precisely.
func (c *Coordinator) renewRefused(ctx context.Context, t leasefence.Token) (leasefence.RenewOutcome, error) {
	reason, _, err := c.classify(ctx, t)
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
	if err := validToken(t); err != nil {
		return leasefence.ReleaseOutcome{}, err
	}
	fence, ok := fenceInt64(t.Fence)
	if !ok {
		return leasefence.ReleaseOutcome{Reason: leasefence.ReasonUnknown}, nil
	}
	hk, lk := c.keys.holder(t.Resource), c.keys.last(t.Resource)
	resp, err := c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(hk), "=", fence),
		clientv3.Compare(clientv3.Value(hk), "=", t.Holder),
	).Then(
		clientv3.OpDelete(hk),
		clientv3.OpPut(lk, mustJSON(lastValue{Holder: t.Holder, Fence: fence, Released: true})),
	).Else(clientv3.OpGet(hk), clientv3.OpGet(lk)).Commit()
	if err != nil {
		return leasefence.ReleaseOutcome{}, err
	}
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
// when t is its current lease, and otherwise the reason it is not.
func (c *Coordinator) classify(ctx context.Context, t leasefence.Token) (leasefence.Reason, *mvccpb.KeyValue, error) {
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(c.keys.holder(t.Resource)), clientv3.OpGet(c.keys.last(t.Resource))).Commit()
	if err != nil {
		return "", nil, err
	}
	hkv := firstKV(resp, 0)
	reason, err := judge(t, hkv, firstKV(resp, 1))
	if reason != "" {
		hkv = nil
	}
	return reason, hkv, err
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

// validToken refuses tokens no coordinator could have issued, as
// leasefence.Coordinator does.
func validToken(t leasefence.Token) error {
	if t.Resource == "" || t.Holder == "" || t.Fence == 0 {
		return fmt.Errorf("%w: token %v lacks a resource, a holder or a fence", leasefence.ErrInvalidRequest, t)
	}
	return nil
}
