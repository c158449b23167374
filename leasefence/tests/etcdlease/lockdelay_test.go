package etcdlease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/leasetest"
)

const testLockDelay = 3 * time.Second

func TestLockDelayConformance(t *testing.T) {
	t.Parallel()
	leasetest.TestLockDelay(t, func(t testing.TB) leasetest.Harness {
		return leasetest.Harness{
			Service:   newCoordinator(t, etcdlease.Options{TTL: time.Second, LockDelay: testLockDelay}),
			TTL:       time.Second,
			Elapse:    time.Sleep,
			Settle:    time.Second,
			LockDelay: testLockDelay,
		}
	})
}

// The lock-delay lives in etcd: an expiry granted by one coordinator is
// found by another made after it (a process that restarted), and the delay
// that one starts is honoured by a third, made later still and with no
// lock-delay of its own.
func TestLockDelayOutlivesTheCoordinator(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	first := newCoordinator(t, etcdlease.Options{Prefix: prefix, LockDelay: testLockDelay})
	if out := acquireOnce(t, first, holderClient(t, "agent-a"), "r"); !out.OK {
		t.Fatalf("Acquire = %+v", out)
	}
	waitDeleted(t, prefix+"holders/r") // the TTL ran out, and etcd revoked the lease
	for _, coord := range []*etcdlease.Coordinator{
		newCoordinator(t, etcdlease.Options{Prefix: prefix, LockDelay: testLockDelay}),
		newCoordinator(t, etcdlease.Options{Prefix: prefix}),
	} {
		out := acquireOnce(t, coord, holderClient(t, "agent-b"), "r")
		if out.OK || out.Reason != leasefence.ReasonLockDelay || out.RetryAfter <= 0 || out.RetryAfter > testLockDelay {
			t.Fatalf("Acquire by a new coordinator in the lock-delay = %+v; want lock-delay", out)
		}
	}
}

func TestLockDelayOption(t *testing.T) {
	newWith := func(opts etcdlease.Options) error {
		c, err := etcdlease.New(cli, opts)
		if err == nil {
			c.Close()
		}
		return err
	}
	leasetest.TestLockDelayOption(t, "Options.LockDelay", func(delay time.Duration, allowLong bool) error {
		return newWith(etcdlease.Options{TTL: time.Second, LockDelay: delay, AllowLongLockDelay: allowLong})
	})
	err := newWith(etcdlease.Options{TTL: time.Second, LockDelay: 1500 * time.Millisecond})
	if !errors.Is(err, leasefence.ErrInvalidRequest) || !strings.Contains(err.Error(), "Options.LockDelay must be whole seconds") {
		t.Errorf("New with a lock-delay of 1.5s = %v, want ErrInvalidRequest saying it must be whole seconds", err)
	}
}

// waitDeleted waits until key is gone from etcd (its lease expired and was
// revoked, say), watching for its deletion.
func waitDeleted(t *testing.T, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count == 0 {
		return
	}
	for w := range cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut()) {
		if w.Err() != nil {
			t.Fatalf("watching %s: %v", key, w.Err())
		}
		if len(w.Events) > 0 {
			return
		}
	}
	t.Fatalf("%s was not deleted in 10s: %v", key, ctx.Err())
}
