package etcdlease

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty and for a
// Gate without WithPrefix.
const DefaultPrefix = "/leasefence/"

// DefaultReplayWindow is Options.ReplayWindow when 0.
const DefaultReplayWindow = 10 * time.Minute

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
	// Prover, if non-nil, proves every fresh grant (Grant.Proof), as
	// leasefence.CoordinatorOptions.Prover does. Every coordinator sharing
	// a prefix needs one that the same resources accept (the same signing
	// key): a retry may be answered by any of them. See grantProof.
	Prover leasefence.Prover
	// LockDelay: after a lease expires (never after a release), the
	// resource is refused to everyone, its last holder included, for
	// LockDelay, with the reason "lock-delay" and a RetryAfter covering the
	// rest, as leasefence.CoordinatorOptions.LockDelay; the delay is an
	// etcd key, so every coordinator on the prefix, and one that
	// restarted, refuses alike. Whole seconds (an etcd lease times it);
	// 0 (the default) is no delay; at most leasefence.MaxLockDelay unless
	// AllowLongLockDelay. It runs from the first acquire that finds the
	// expiry, not from the expiry itself: see lockdelay.go for why.
	LockDelay time.Duration
	// AllowLongLockDelay accepts a LockDelay above leasefence.MaxLockDelay.
	AllowLongLockDelay bool
}

// Coordinator is a leasefence.Service on etcd. It is safe for concurrent
// use, and any number of Coordinators (in any number of processes) may share
// one etcd cluster and prefix: every decision is an etcd transaction.
//
// The one thing it does in the background is grant spare leases ahead of
// acquires (see acquireLease); that work ends with Close, or when its
// client is closed, whichever comes first.
type Coordinator struct {
	cli    *clientv3.Client
	keys   keys
	ttl    int64 // seconds
	clock  leasefence.Clock
	window time.Duration
	prover leasefence.Prover
	delay  int64 // Options.LockDelay, seconds

	// life bounds the background work: cancelled by Close and, since it
	// derives from the client's context, by the client's Close.
	life    context.Context
	end     context.CancelFunc
	working sync.WaitGroup // background work under way

	mu       sync.Mutex
	closed   bool             // no background work starts once it is set
	replay   clientv3.LeaseID // the lease request records are attached to
	replayAt time.Time        // when it was granted
	// spares are etcd leases granted ahead for the next acquires, with
	// nothing attached, in the order they were kept; refilling is true while grants for
	// them are under way. See acquireLease for why using one is safe.
	spares    []spareLease
	refilling bool
	burst     int // leases the next refill grants: 1 to spareLeases

	// grantedMu guards granted and pruneAt, apart from mu, so that a
	// prune of many grants never holds up the spare leases.
	grantedMu sync.Mutex
	// granted is the etcd lease of each grant the coordinator made or
	// renewed, until it is released or refused (see remember); pruneAt
	// is its size at which remember next forgets the oldest.
	granted map[grantKey]grantLease
	pruneAt int
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
	case opts.LockDelay%time.Second != 0:
		return nil, fmt.Errorf("%w: Options.LockDelay must be whole seconds (an etcd lease times it), got %v", leasefence.ErrInvalidRequest, opts.LockDelay)
	}
	if err := leasefence.ValidateLockDelay("Options.LockDelay", opts.LockDelay, opts.AllowLongLockDelay); err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = leasefence.NewMonotonicClock("etcd")
	}
	window := opts.ReplayWindow
	if window == 0 {
		window = DefaultReplayWindow
	}
	life, end := context.WithCancel(cli.Ctx())
	return &Coordinator{
		cli:    cli,
		keys:   keys{prefix: prefixOr(opts.Prefix)},
		ttl:    int64(opts.TTL / time.Second),
		clock:  clock,
		window: window,
		life:   life,
		end:    end,
		prover: opts.Prover,
		delay:  int64(opts.LockDelay / time.Second),
	}, nil
}

// Close ends everything the coordinator does in the background and waits
// until it has ended: grants of spare leases under way are abandoned, and
// the spares it holds are forgotten (with nothing attached, they expire by
// themselves). It does not close the client, and leaves every lease granted
// to a holder as it is. After Close the coordinator still answers calls,
// granting each acquire its own lease. Close is safe to call more than
// once, and always returns nil.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.closed = true
	c.spares = nil
	c.mu.Unlock()
	c.end()
	c.working.Wait()
	return nil
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

type lastValue struct {
	Holder string `json:"holder"`
	// Fence is 0 while the grant that wrote the key is the latest: the
	// key's mod revision is then the fence. A release writes the fence.
	Fence    int64 `json:"fence,omitempty"`
	Released bool  `json:"released,omitempty"`
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
