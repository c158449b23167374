package leasefence_test

// Ordinary use with real goroutines, net/http inside a write, and hostile
// arguments: each test here reproduces one way the library could break its
// own guarantees.

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// noPanic runs f and returns what it panicked with, if anything.
func noPanic(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// within runs f on its own goroutine and fails the test if it has not
// returned after guard: how a test tells a deadlock from a slow call.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	recv(t, done, what)
}

// TestGateNestedCommitsFromGoroutines: a write that fans out to goroutines,
// each committing with the write's ctx, is the documented nested form. The
// nested commits race with each other, not with the floor: afterwards the
// floor is the highest fence admitted and the fence below it is refused.
func TestGateNestedCommitsFromGoroutines(t *testing.T) {
	const workers, each = 4, 64
	iterations := 2000
	if testing.Short() {
		iterations = 200
	}
	top := leasefence.Fence(2 + 4*(each-1) + (workers - 1)) // 257
	for range iterations {
		g := leasefence.NewFenceGate("r")
		err := g.Commit(t.Context(), tok("r", "h", 1), func(ctx context.Context) error {
			var wg sync.WaitGroup
			for i := range workers {
				wg.Go(func() {
					for j := range each {
						f := leasefence.Fence(2 + 4*j + i)
						err := g.Commit(ctx, tok("r", "h", f), func(context.Context) error { return nil })
						if err != nil && !errors.Is(err, leasefence.ErrStaleFence) {
							t.Errorf("nested Commit(%d) = %v", f, err)
						}
					}
				})
			}
			wg.Wait()
			return nil
		})
		if err != nil {
			t.Fatalf("outer Commit = %v", err)
		}
		if got := g.Floor(); got.Fence != top {
			t.Fatalf("Floor() = %v after nested commits up to fence %d", got, top)
		}
		if err := g.Commit(t.Context(), tok("r", "h", top-1), func(context.Context) error { return nil }); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("Commit(%d) below the floor %d = %v, want ErrStaleFence", top-1, top, err)
		}
	}
}

// TestGateWriteMakesAnHTTPCall: a write that makes an ordinary HTTP request
// with its ctx, reads and closes the body and returns. The transport's
// goroutines keep using that ctx (and contexts derived from it) after the
// write has returned, while the gate runs the next write: nothing the user
// did is wrong, so nothing may race, and the next write's ctx carries none
// of the previous one's values.
func TestGateWriteMakesAnHTTPCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	client := srv.Client()
	g := leasefence.NewFenceGate("r")
	type key struct{}
	for i := range 200 {
		parent := context.WithValue(t.Context(), key{}, i)
		err := g.Commit(parent, tok("r", "h", 1), func(ctx context.Context) error {
			if got := ctx.Value(key{}); got != i {
				t.Errorf("write %d sees the value %v", i, got)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			if cerr := resp.Body.Close(); err == nil {
				err = cerr
			}
			return err
		})
		if err != nil {
			t.Fatalf("Commit %d = %v", i, err)
		}
	}
}

// TestGateNilArguments: a nil ctx or a nil write is refused with a named
// error before anything is touched, and the gate stays usable.
func TestGateNilArguments(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	//lint:ignore SA1012 a nil ctx is the hostile argument under test
	var nilCtx context.Context
	var err error
	if p := noPanic(func() { err = g.Commit(nilCtx, tok("r", "a", 1), func(context.Context) error { return nil }) }); p != nil || err == nil {
		t.Errorf("Commit(nil ctx) panicked with %v, returned %v; want a named error", p, err)
	}
	if p := noPanic(func() { err = g.Commit(t.Context(), tok("r", "a", 2), nil) }); p != nil || err == nil {
		t.Errorf("Commit(nil write) panicked with %v, returned %v; want a named error", p, err)
	}
	if got := g.Floor(); got != (leasefence.Token{}) {
		t.Errorf("Floor() = %v after refused nil arguments, want untouched", got)
	}
	within(t, "Commit after the nil arguments (gate left taken?)", func() {
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		if err := g.Commit(ctx, tok("r", "a", 3), func(context.Context) error { return nil }); err != nil {
			t.Errorf("Commit afterwards = %v", err)
		}
	})
}

// TestZeroValues: a zero FenceGate and a zero Coordinator answer with an
// error rather than panicking, and the coordinator's lock stays free.
func TestZeroValues(t *testing.T) {
	var g leasefence.FenceGate
	var err error
	if p := noPanic(func() { err = g.Commit(t.Context(), tok("r", "a", 1), func(context.Context) error { return nil }) }); p != nil || err == nil {
		t.Errorf("zero FenceGate Commit panicked with %v, returned %v", p, err)
	}
	if p := noPanic(func() { err = g.Admit(tok("r", "a", 1)) }); p != nil || err == nil {
		t.Errorf("zero FenceGate Admit panicked with %v, returned %v", p, err)
	}
	if p := noPanic(func() { _ = g.Floor(); _ = g.Rejections(); _ = g.WouldAdmit(tok("r", "a", 1)) }); p != nil {
		t.Errorf("zero FenceGate readers panicked with %v", p)
	}

	var c leasefence.Coordinator
	if p := noPanic(func() { _, err = c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"}) }); p != nil || err == nil {
		t.Errorf("zero Coordinator Acquire panicked with %v, returned %v", p, err)
	}
	if p := noPanic(func() { _, err = c.Renew(leasefence.RenewRequest{RequestID: "1", Token: tok("r", "a", 1)}) }); p != nil || err == nil {
		t.Errorf("zero Coordinator Renew panicked with %v, returned %v", p, err)
	}
	if p := noPanic(func() { _, err = c.Release(tok("r", "a", 1)) }); p != nil || err == nil {
		t.Errorf("zero Coordinator Release panicked with %v, returned %v", p, err)
	}
	within(t, "IssuedFence of a zero Coordinator (mutex left locked?)", func() { _ = c.IssuedFence() })
}

// TestCoordinatorHugeTTL: a TTL whose expiry would overflow the clock's
// arithmetic is refused at construction, or the lease it grants holds the
// resource: never an expiry wrapped into the past that lets a second holder
// in at once.
func TestCoordinatorHugeTTL(t *testing.T) {
	for _, ttl := range []time.Duration{math.MaxInt64, math.MaxInt64 - time.Second, math.MaxInt64 / 2} {
		clock := leasefence.NewManualClock("coord", leasefence.WithStart(time.Hour))
		c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
		if err != nil {
			continue // refused at construction
		}
		a, err := c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"})
		if err != nil || !a.OK {
			continue // refused when granting
		}
		clock.Advance(time.Second)
		b, err := c.Acquire(leasefence.AcquireRequest{RequestID: "2", Holder: "b", Resource: "r"})
		if err == nil && b.OK {
			t.Errorf("TTL %v: a second holder was granted %v while %v is live (expiry %v)", ttl, b.Grant.Token, a.Grant.Token, a.Grant.CoordinatorExpiresAt)
		}
	}
}

// TestCoordinatorReadingNearTheEndOfTheClock: a clock reading so far from
// its origin that reading + TTL overflows grants nothing; it does not wrap
// the expiry into the past.
func TestCoordinatorReadingNearTheEndOfTheClock(t *testing.T) {
	clock := leasefence.NewManualClock("coord", leasefence.WithStart(math.MaxInt64-time.Minute))
	c := newCoordinator(t, clock, time.Hour)
	a, err := c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"})
	if err == nil && a.OK {
		b, err := c.Acquire(leasefence.AcquireRequest{RequestID: "2", Holder: "b", Resource: "r"})
		if err == nil && b.OK {
			t.Errorf("a second holder was granted %v while %v is live (expiry %v)", b.Grant.Token, a.Grant.Token, a.Grant.CoordinatorExpiresAt)
		}
	}
}

// TestCoordinatorStartFenceNeverWraps: the fence counter never wraps to 0
// and then 1: once the last fence is minted, acquisitions fail.
func TestCoordinatorStartFenceNeverWraps(t *testing.T) {
	clock := leasefence.NewManualClock("coord")
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second, StartFence: math.MaxUint64 - 1})
	if err != nil {
		t.Fatal(err)
	}
	last := leasefence.Fence(0)
	for i, res := range []string{"r1", "r2", "r3"} {
		out, err := c.Acquire(leasefence.AcquireRequest{RequestID: res, Holder: "a", Resource: res})
		if err != nil || !out.OK {
			continue
		}
		if f := out.Grant.Token.Fence; f <= last || f == 0 {
			t.Errorf("acquire %d minted fence %d after %d", i, f, last)
		}
		last = out.Grant.Token.Fence
	}
	if got := c.IssuedFence(); got != math.MaxUint64 {
		t.Errorf("IssuedFence() = %d, want the last fence %d", got, uint64(math.MaxUint64))
	}
}

// TestGateTraceHookRunsOutsideTheGate: the Commit hook runs after the gate
// is given up, so a hook may commit to the same gate and a slow hook holds
// up no other writer.
func TestGateTraceHookRunsOutsideTheGate(t *testing.T) {
	t.Run("hook commits", func(t *testing.T) {
		var g *leasefence.FenceGate
		var first atomic.Bool
		g = leasefence.NewFenceGate("r", leasefence.WithGateTrace(&leasefence.GateTrace{
			Commit: func(leasefence.CommitInfo) {
				if first.CompareAndSwap(false, true) {
					if err := g.Commit(context.Background(), tok("r", "hook", 2), func(context.Context) error { return nil }); err != nil {
						t.Errorf("Commit from the hook = %v", err)
					}
				}
			},
		}))
		within(t, "a Commit whose hook commits (deadlock?)", func() {
			if err := g.Commit(t.Context(), tok("r", "a", 1), func(context.Context) error { return nil }); err != nil {
				t.Errorf("Commit = %v", err)
			}
		})
	})
	t.Run("slow hook", func(t *testing.T) {
		inHook := make(chan struct{})
		unblock := make(chan struct{})
		var first atomic.Bool
		g := leasefence.NewFenceGate("r", leasefence.WithGateTrace(&leasefence.GateTrace{
			Commit: func(leasefence.CommitInfo) {
				if first.CompareAndSwap(false, true) {
					close(inHook)
					<-unblock
				}
			},
		}))
		defer close(unblock)
		go func() {
			_ = g.Commit(context.Background(), tok("r", "a", 1), func(context.Context) error { return nil })
		}()
		recv(t, inHook, "the first hook")
		within(t, "a Commit while another Commit's hook runs", func() {
			if err := g.Commit(t.Context(), tok("r", "b", 2), func(context.Context) error { return nil }); err != nil {
				t.Errorf("Commit = %v", err)
			}
		})
	})
}

// TestCoordinatorHugeReplayCache: an out-of-range ReplayCache is an error
// from NewCoordinator, not a panic.
func TestCoordinatorHugeReplayCache(t *testing.T) {
	var err error
	p := noPanic(func() {
		_, err = leasefence.NewCoordinator(leasefence.CoordinatorOptions{
			Clock: leasefence.NewManualClock("coord"), TTL: time.Second, ReplayCache: math.MaxInt,
		})
	})
	if p != nil || err == nil {
		t.Errorf("NewCoordinator(ReplayCache: MaxInt) panicked with %v, returned %v; want an error", p, err)
	}
}

// TestGateRefusalLogIsBounded: a long-running gate's refusal log keeps a
// bounded number of refusals, and the count still sees every one.
func TestGateRefusalLogIsBounded(t *testing.T) {
	const n = 10_000
	g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(2))
	for range n {
		_ = g.Commit(t.Context(), tok("r", "old", 1), func(context.Context) error { return nil })
	}
	if got := g.RejectionCount(); got != n {
		t.Errorf("RejectionCount() = %d, want %d", got, n)
	}
	rs := g.Rejections()
	if len(rs) >= n {
		t.Errorf("Rejections() retains all %d refusals: the log is unbounded", len(rs))
	}
	if len(rs) == 0 || rs[len(rs)-1].Seq != n {
		t.Errorf("the newest retained refusal is not Seq %d", n)
	}
}
