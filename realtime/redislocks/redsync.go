package redislocks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

func init() {
	register(registry.Redsync, adapter{servers: 1, newLock: func(rdbs []*redis.Client, prefix string) realtime.Lock { return NewRedsync(rdbs[0], prefix) }})
}

// Redsync is redsync's Mutex on one Redis, as a realtime.Lock: one
// TryLock per Acquire (WithTries(1), WithExpiry(ttl)), its keys under
// prefix.
type Redsync struct {
	rs     *redsync.Redsync
	prefix string
}

// NewRedsync is redsync on rdb.
func NewRedsync(rdb *redis.Client, prefix string) *Redsync { return NewRedlock(prefix, rdb) }

// NewRedlock is redsync over one pool per client, each an independent
// Redis: its Redlock algorithm, a lock held once a majority of them set
// its key.
func NewRedlock(prefix string, rdbs ...*redis.Client) *Redsync {
	pools := make([]redsyncredis.Pool, len(rdbs))
	for i, rdb := range rdbs {
		pools[i] = goredis.NewPool(rdb)
	}
	return &Redsync{rs: redsync.New(pools...), prefix: prefix}
}

// Acquire implements realtime.Lock.
func (r *Redsync) Acquire(ctx context.Context, resource, _ string, ttl time.Duration) (realtime.Lease, error) {
	m := r.rs.NewMutex(r.prefix+resource, redsync.WithExpiry(ttl), redsync.WithTries(1))
	err := m.TryLockContext(ctx)
	// Held: taken on a majority (ErrTaken), or on some server with no
	// majority left for this holder (ErrNodeTaken, over several servers).
	// A server that did not answer, with no taken key, is an error.
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	switch {
	case errors.Is(err, redsync.ErrFailed), errors.As(err, &taken), errors.As(err, &nodeTaken):
		return nil, fmt.Errorf("redsync: %s: %w", resource, realtime.ErrHeld)
	case err != nil:
		return nil, err
	}
	return &redsyncLease{m: m, mu: make(chan struct{}, 1)}, nil
}

type redsyncLease struct {
	// mu is full while a call uses m: redsync's Mutex is not safe for
	// concurrent use. A channel, not a sync.Mutex: a call waits on the
	// network under it, and a goroutine waiting on a sync.Mutex is not
	// durably blocked in a testing/synctest bubble, whose clock would stop.
	mu chan struct{}
	m  *redsync.Mutex
}

func (l *redsyncLease) lock()   { l.mu <- struct{}{} }
func (l *redsyncLease) unlock() { <-l.mu }

// Deadline implements realtime.Lease: redsync's Until().
func (l *redsyncLease) Deadline() time.Time {
	l.lock()
	defer l.unlock()
	return l.m.Until()
}

// Fence implements realtime.Lease: redsync has none.
func (*redsyncLease) Fence() (uint64, bool) { return 0, false }

// Renew implements realtime.Lease: ExtendContext.
func (l *redsyncLease) Renew(ctx context.Context) error {
	l.lock()
	defer l.unlock()
	ok, err := l.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = redsync.ErrExtendFailed
	}
	return notHeld(err)
}

// Release implements realtime.Lease: UnlockContext.
func (l *redsyncLease) Release(ctx context.Context) error {
	l.lock()
	defer l.unlock()
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = redsync.ErrLockAlreadyExpired
	}
	return notHeld(err)
}
