package redislocks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

func init() {
	register(registry.Redislock, adapter{servers: 1, newLock: func(rdbs []*redis.Client, prefix string) realtime.Lock { return NewRedislock(rdbs[0], prefix) }})
}

// Redislock is bsm/redislock on one Redis, as a realtime.Lock: one
// Obtain per Acquire, with no retries, its keys under prefix.
type Redislock struct {
	c      *redislock.Client
	prefix string
}

// NewRedislock is bsm/redislock on rdb.
func NewRedislock(rdb *redis.Client, prefix string) *Redislock {
	return &Redislock{c: redislock.New(rdb), prefix: prefix}
}

// Acquire implements realtime.Lock.
func (r *Redislock) Acquire(ctx context.Context, resource, _ string, ttl time.Duration) (realtime.Lease, error) {
	sent := time.Now()
	l, err := r.c.Obtain(ctx, r.prefix+resource, ttl, &redislock.Options{RetryStrategy: redislock.NoRetry()})
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		return nil, fmt.Errorf("redislock: %s: %w", resource, realtime.ErrHeld)
	case err != nil:
		return nil, err
	}
	return &redislockLease{l: l, ttl: ttl, deadline: sent.Add(ttl)}, nil
}

type redislockLease struct {
	l   *redislock.Lock
	ttl time.Duration

	mu       sync.Mutex
	deadline time.Time
}

// Deadline implements realtime.Lease: the TTL asked for, from the send of
// the call that set it.
func (l *redislockLease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Fence implements realtime.Lease: redislock has none.
func (*redislockLease) Fence() (uint64, bool) { return 0, false }

// Renew implements realtime.Lease: Refresh by the TTL.
func (l *redislockLease) Renew(ctx context.Context) error {
	sent := time.Now()
	if err := l.l.Refresh(ctx, l.ttl, nil); err != nil {
		return notHeld(err)
	}
	l.mu.Lock()
	l.deadline = sent.Add(l.ttl)
	l.mu.Unlock()
	return nil
}

// Release implements realtime.Lease.
func (l *redislockLease) Release(ctx context.Context) error { return notHeld(l.l.Release(ctx)) }

// notHeld is err, the libraries' answer to a renewal or release, wrapped
// with realtime.ErrNotHeld where it says the lock is no longer held
// (redislock's ErrNotObtained and ErrLockNotHeld, redsync's
// ErrExtendFailed, ErrLockAlreadyExpired and ErrTaken), as the lease
// contract asks; any other error (a connection's) as it is.
func notHeld(err error) error {
	var taken *redsync.ErrTaken
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrNotObtained), errors.Is(err, redislock.ErrLockNotHeld), errors.Is(err, redsync.ErrExtendFailed),
		errors.Is(err, redsync.ErrLockAlreadyExpired), errors.As(err, &taken):
		return fmt.Errorf("%w (%w)", realtime.ErrNotHeld, err)
	}
	return err
}
