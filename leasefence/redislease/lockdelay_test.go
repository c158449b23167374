package redislease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/redislease"
)

const testLockDelay = 2 * time.Second

func TestLockDelayConformance(t *testing.T) {
	c := needRedis(t)
	leasetest.TestLockDelay(t, func(t testing.TB) leasetest.Harness {
		return leasetest.Harness{
			Service:   newCoordinator(t, c, redislease.Options{LockDelay: testLockDelay}),
			TTL:       testTTL,
			Elapse:    time.Sleep,
			Settle:    20 * time.Millisecond,
			LockDelay: testLockDelay,
		}
	})
}

// The lock-delay lives in Redis: a coordinator made after the expiry (a
// process that restarted), and one made without a lock-delay of its own,
// refuse the resource alike until it has passed.
func TestLockDelayOutlivesTheCoordinator(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	first := newCoordinator(t, c, redislease.Options{Prefix: prefix, LockDelay: testLockDelay})
	a := newClient(t, "agent-a")
	req, _ := a.BeginAcquire("r")
	if out, err := first.Acquire(t.Context(), req); err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	time.Sleep(testTTL + 20*time.Millisecond)
	for _, coord := range []*redislease.Coordinator{
		newCoordinator(t, c, redislease.Options{Prefix: prefix, LockDelay: testLockDelay}),
		newCoordinator(t, c, redislease.Options{Prefix: prefix}),
	} {
		req, _ := newClient(t, "agent-b").BeginAcquire("r")
		out, err := coord.Acquire(t.Context(), req)
		if err != nil || out.OK || out.Reason != leasefence.ReasonLockDelay || out.RetryAfter <= 0 || out.RetryAfter > testLockDelay {
			t.Fatalf("Acquire by a new coordinator in the lock-delay = %+v, %v; want lock-delay", out, err)
		}
	}
}

func TestLockDelayOption(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	leasetest.TestLockDelayOption(t, "Options.LockDelay", func(delay time.Duration, allowLong bool) error {
		_, err := redislease.New(c, redislease.Options{TTL: time.Second, LockDelay: delay, AllowLongLockDelay: allowLong})
		return err
	})
	_, err := redislease.New(c, redislease.Options{TTL: time.Second, LockDelay: 1500 * time.Microsecond})
	if !errors.Is(err, leasefence.ErrInvalidRequest) || !strings.Contains(err.Error(), "Options.LockDelay must be whole milliseconds") {
		t.Errorf("New with a lock-delay of 1.5ms = %v, want ErrInvalidRequest saying it must be whole milliseconds", err)
	}
}
