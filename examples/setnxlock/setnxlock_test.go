package setnxlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/labtest"
)

// locker is the lock as the lab's agents call it, in place of your code.
type locker struct{ *Locker }

func (l locker) Acquire(ctx context.Context, resource, _ string, ttl time.Duration) (labtest.Lease, error) {
	k, err := l.Obtain(ctx, resource, ttl)
	if errors.Is(err, ErrNotObtained) {
		return nil, fmt.Errorf("%w: %w", err, labtest.ErrHeld)
	}
	if err != nil {
		return nil, err
	}
	return lease{k}, nil
}

// lease is one held lock, as the lab's agents hold it.
type lease struct{ *Lock }

func (l lease) Deadline() time.Time { return l.Until() }

// Fence: the lock has no fencing token, so its holders write naively.
func (lease) Fence() (uint64, bool) { return 0, false }

func (l lease) Renew(ctx context.Context) error { return notHeld(l.Refresh(ctx)) }

func (l lease) Release(ctx context.Context) error { return notHeld(l.Lock.Release(ctx)) }

// notHeld says ErrLost as the lease contract asks: matching
// labtest.ErrNotHeld.
func notHeld(err error) error {
	if errors.Is(err, ErrLost) {
		return fmt.Errorf("%w: %w", err, labtest.ErrNotHeld)
	}
	return err
}

// TestUnderTheLab runs the lab's battery on the lock in virtual time, on
// an in-memory Redis: a few seconds of wall time for minutes of faults.
func TestUnderTheLab(t *testing.T) {
	labtest.CheckVirtual(t, func(rdb *redis.Client) labtest.Lock { return locker{New(rdb)} })
}
