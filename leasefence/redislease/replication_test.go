package redislease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/redislease"
)

func TestReplicationRefusesBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		r    redislease.Replication
	}{
		{"negative replicas", c, redislease.Replication{Replicas: -1, Timeout: time.Second}},
		{"no timeout", c, redislease.Replication{Replicas: 1}},
		{"timeout not whole ms", c, redislease.Replication{Replicas: 1, Timeout: 1500 * time.Microsecond}},
		{"timeout with no replicas", c, redislease.Replication{Timeout: time.Second}},
		{"a ring client", ring, redislease.Replication{Replicas: 1, Timeout: time.Second}},
	} {
		if _, err := redislease.New(tc.rdb, redislease.Options{TTL: time.Second, Replication: tc.r}); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("New with %s = %v, want ErrInvalidRequest", tc.name, err)
		}
		if _, err := redislease.NewGate(tc.rdb, "r", redislease.GateOptions{Replication: tc.r}); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("NewGate with %s = %v, want ErrInvalidRequest", tc.name, err)
		}
	}
	ok := redislease.Replication{Replicas: 2, Timeout: time.Millisecond}
	if _, err := redislease.New(c, redislease.Options{TTL: time.Second, Replication: ok}); err != nil {
		t.Errorf("New with %+v = %v", ok, err)
	}
}

// wantNotReplicated fails t unless err is a *ReplicationError for op and
// fence that no replica acknowledged.
func wantNotReplicated(t *testing.T, err error, op string, fence leasefence.Fence) {
	t.Helper()
	var rerr *redislease.ReplicationError
	if !errors.Is(err, redislease.ErrNotReplicated) || !errors.As(err, &rerr) {
		t.Fatalf("%s = %v; want ErrNotReplicated", op, err)
	}
	if rerr.Op != op || rerr.Fence != fence || rerr.Acked != 0 || rerr.Wanted != 1 {
		t.Fatalf("%s: %+v; want op %s, fence %d, 0 of 1 acknowledged", op, rerr, op, fence)
	}
}

// On a Redis with no replica every WAIT times out: each write is applied
// and answered with ErrNotReplicated, and a retry of the acquire (the same
// request id) waits again rather than pass the unreplicated grant off as
// safe.
func TestReplicationTimeoutIsNamed(t *testing.T) {
	c := needRedis(t)
	ctx := t.Context()
	repl := redislease.Replication{Replicas: 1, Timeout: 20 * time.Millisecond}
	prefix := newPrefix(t)
	coord := newCoordinator(t, c, redislease.Options{Prefix: prefix, TTL: 10 * time.Second, Replication: repl})
	req := leasefence.AcquireRequest{RequestID: "a-1", Holder: "a", Resource: "r"}
	_, err := coord.Acquire(ctx, req)
	wantNotReplicated(t, err, "acquire", 1)
	_, err = coord.Acquire(ctx, req)
	wantNotReplicated(t, err, "acquire", 1)
	// The grant stands on the primary: the resource is held by a.
	plain := newCoordinator(t, c, redislease.Options{Prefix: prefix})
	if out, err := plain.Acquire(ctx, leasefence.AcquireRequest{RequestID: "b-1", Holder: "b", Resource: "r"}); err != nil || out.Reason != leasefence.ReasonHeld || out.HeldBy != "a" {
		t.Fatalf("Acquire by b = %+v, %v; want held by a", out, err)
	}
	// A refusal writes nothing to wait for.
	if out, err := coord.Acquire(ctx, leasefence.AcquireRequest{RequestID: "c-1", Holder: "c", Resource: "r"}); err != nil || out.Reason != leasefence.ReasonHeld {
		t.Fatalf("Acquire by c = %+v, %v; want held", out, err)
	}

	g := openGate(t, c, prefix, "r", redislease.GateOptions{Replication: repl})
	wantNotReplicated(t, g.Commit(ctx, tok("r", "a", 1), "v1"), "commit", 1)
	wantNotReplicated(t, g.Admit(ctx, tok("r", "b", 2)), "admit", 2)
	wantState(t, g, tok("r", "b", 2), []string{"v1"})
	// A refusal is a refusal, whatever the replicas.
	if err := g.Commit(ctx, tok("r", "a", 1), "v2"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("stale Commit = %v; want ErrStaleFence", err)
	}
}

// Through the Sentinels, with WAIT for both replicas and a watermark, the
// coordinator and the gate are still the library's: the conformance suites
// pass on a failover client.
func TestConformanceThroughSentinel(t *testing.T) {
	t.Parallel()
	tp := startTopology(t)
	repl := redislease.Replication{Replicas: 2, Timeout: 2 * time.Second}
	wm := redislease.NewWatermark()
	t.Run("service", func(t *testing.T) {
		leasetest.TestService(t, func(t testing.TB) leasetest.Harness {
			return leasetest.Harness{
				Service: newCoordinator(t, tp.app, redislease.Options{Replication: repl, Watermark: wm}),
				TTL:     testTTL,
				Elapse:  time.Sleep,
				Settle:  20 * time.Millisecond,
			}
		})
	})
	t.Run("gate", func(t *testing.T) {
		leasetest.TestGate(t, func(t testing.TB, resource string) leasetest.GateHarness {
			return openGate(t, tp.app, newPrefix(t), resource, redislease.GateOptions{Replication: repl, Watermark: wm}).harness()
		})
	})
	if rs, n := wm.Rewinds(); n != 0 {
		t.Fatalf("%d rewinds on a deployment that never failed over: %v", n, rs)
	}
}

// Many goroutines of one process share a watermark on one counter: every
// fence is issued once, and none is taken for a rewind.
func TestWatermarkConcurrentAcquires(t *testing.T) {
	c := needRedis(t)
	wm := redislease.NewWatermark()
	prefix := newPrefix(t)
	coord := newCoordinator(t, c, redislease.Options{Prefix: prefix, TTL: 10 * time.Second, Watermark: wm})
	const workers, each = 8, 25
	fences := make(chan leasefence.Fence, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				res := "r-" + string(rune('a'+w)) + "-" + string(rune('a'+i))
				out, err := coord.Acquire(context.Background(), leasefence.AcquireRequest{RequestID: res, Holder: "h", Resource: res})
				if err != nil || !out.OK {
					t.Errorf("Acquire %s = %+v, %v", res, out, err)
					return
				}
				fences <- out.Grant.Token.Fence
			}
		})
	}
	wg.Wait()
	close(fences)
	seen := map[leasefence.Fence]bool{}
	for f := range fences {
		if seen[f] {
			t.Fatalf("fence %d issued twice", f)
		}
		seen[f] = true
	}
	if rs, n := wm.Rewinds(); n != 0 {
		t.Fatalf("rewinds %v on a counter that never went back", rs)
	}
	if got := wm.Fence(prefix); got != workers*each {
		t.Fatalf("watermark %d; want %d", got, workers*each)
	}
}

// Lock passes its Replication on: on a Redis with no replica the grant is
// never acknowledged, so Lock returns no session (leasefence.Hold retries
// the acquire until ctx ends, and reports ctx's error).
func TestLockWaitsForReplicas(t *testing.T) {
	c := needRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	s, err := redislease.Lock(ctx, c, "r", redislease.LockOptions{Prefix: newPrefix(t), Replication: redislease.Replication{Replicas: 1, Timeout: 20 * time.Millisecond}})
	if err == nil {
		s.Release(context.Background())
		t.Fatal("Lock with WAIT 1 on a Redis without replicas returned a session")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v; want the deadline's error", err)
	}
}
