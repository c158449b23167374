package etcdlease_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
)

// callerKey marks the contexts the test itself passes to the coordinator.
type callerKey struct{}

// stallingBackgroundClient is a client of the test member on which every
// lease grant the caller did not ask for (the coordinator's background
// grants of spare leases) hangs until its context ends: a cluster too slow
// to answer them.
func stallingBackgroundClient(t *testing.T) *clientv3.Client {
	t.Helper()
	stall := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Lease/LeaseGrant" && ctx.Value(callerKey{}) == nil {
			<-ctx.Done()
			return ctx.Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return interceptedClient(t, stall)
}

// waitGoroutines polls until no more than base goroutines run, and fails t
// if that takes longer than within: well under the background grants' own
// 10 s bound, which is what outlived a closed client before.
func waitGoroutines(t *testing.T, base int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines %v later, %d before:\n%s", n, within, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRefill makes c start a background refill of its spare leases (an
// acquire with no spare does), which the client stalls.
func startRefill(t *testing.T, c *etcdlease.Coordinator, client string) {
	t.Helper()
	ctx := context.WithValue(t.Context(), callerKey{}, true)
	out, err := c.Acquire(ctx, leasefence.AcquireRequest{RequestID: client + "-1", Holder: client, Resource: "r-" + client})
	if err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
}

// TestCloseEndsBackgroundWork: everything a coordinator starts ends with
// its Close, or with its client's, whatever the cluster is doing.
func TestCloseEndsBackgroundWork(t *testing.T) {
	t.Run("Close", func(t *testing.T) {
		c := stallingBackgroundClient(t)
		base := runtime.NumGoroutine()
		coord, err := etcdlease.New(c, etcdlease.Options{Prefix: newPrefix(), TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		startRefill(t, coord, "a")
		done := make(chan struct{})
		go func() { _ = coord.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("Close did not return")
		}
		waitGoroutines(t, base, 3*time.Second)
		_ = coord.Close() // again: a no-op
		// It still answers, granting each acquire its own lease, and starts
		// nothing in the background.
		startRefill(t, coord, "b")
		waitGoroutines(t, base, 3*time.Second)
		if n := len(coord.SpareLeases()); n != 0 {
			t.Errorf("%d spares after Close", n)
		}
	})
	t.Run("ClientClose", func(t *testing.T) {
		base := runtime.NumGoroutine()
		c := stallingBackgroundClient(t)
		coord, err := etcdlease.New(c, etcdlease.Options{Prefix: newPrefix(), TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		startRefill(t, coord, "a")
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		waitGoroutines(t, base, 3*time.Second)
	})
}
