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

const testLockDelay = 1200 * time.Millisecond

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
	for _, tc := range []struct {
		name    string
		opts    redislease.Options
		wantErr string // "" for accepted
	}{
		{"a second", redislease.Options{TTL: time.Second, LockDelay: time.Second}, ""},
		{"a day", redislease.Options{TTL: time.Second, LockDelay: leasefence.MaxLockDelay}, ""},
		{"a week, allowed", redislease.Options{TTL: time.Second, LockDelay: 7 * leasefence.MaxLockDelay, AllowLongLockDelay: true}, ""},
		{"negative", redislease.Options{TTL: time.Second, LockDelay: -time.Second}, "Options.LockDelay must be >= 0"},
		{"above a day", redislease.Options{TTL: time.Second, LockDelay: 25 * time.Hour}, "Options.LockDelay 25h0m0s is longer than MaxLockDelay"},
		{"not whole ms", redislease.Options{TTL: time.Second, LockDelay: 1500 * time.Microsecond}, "Options.LockDelay must be whole milliseconds"},
	} {
		_, err := redislease.New(c, tc.opts)
		if tc.wantErr == "" && err != nil {
			t.Errorf("New with a lock-delay of %s = %v", tc.name, err)
		}
		if tc.wantErr != "" && (!errors.Is(err, leasefence.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("New with a lock-delay of %s = %v, want ErrInvalidRequest saying %q", tc.name, err, tc.wantErr)
		}
	}
}
