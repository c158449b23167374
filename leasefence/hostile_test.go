package leasefence_test

// Ordinary use with real goroutines, net/http inside a write, and hostile
// arguments: each test here reproduces one way the library could break its
// own guarantees.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
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
	var nilCtx context.Context
	var err error
	if p := noPanic(func() { err = g.Commit(nilCtx, tok("r", "a", 1), func(context.Context) error { return nil }) }); p != nil || !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("Commit(nil ctx) panicked with %v, returned %v; want ErrInvalidRequest", p, err)
	}
	if p := noPanic(func() { err = g.Commit(t.Context(), tok("r", "a", 2), nil) }); p != nil || !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("Commit(nil write) panicked with %v, returned %v; want ErrInvalidRequest", p, err)
	}
	wantRejections(t, g)
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
	uninit := func(what string, p any, err error) {
		t.Helper()
		if p != nil || !errors.Is(err, leasefence.ErrUninitialized) {
			t.Errorf("%s panicked with %v, returned %v; want ErrUninitialized", what, p, err)
		}
	}
	uninit("zero FenceGate Commit", noPanic(func() { err = g.Commit(t.Context(), tok("r", "a", 1), func(context.Context) error { return nil }) }), err)
	uninit("zero FenceGate Admit", noPanic(func() { err = g.Admit(tok("r", "a", 1)) }), err)
	if p := noPanic(func() {
		if g.Floor() != (leasefence.Token{}) || g.Rejections() != nil || g.WouldAdmit(tok("r", "a", 1)) || g.RejectionCount() != 0 {
			t.Errorf("zero FenceGate readers: Floor %v, Rejections %v, WouldAdmit true or a count", g.Floor(), g.Rejections())
		}
	}); p != nil {
		t.Errorf("zero FenceGate readers panicked with %v", p)
	}

	var c leasefence.Coordinator
	uninit("zero Coordinator Acquire", noPanic(func() { _, err = c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"}) }), err)
	uninit("zero Coordinator Renew", noPanic(func() { _, err = c.Renew(leasefence.RenewRequest{RequestID: "1", Token: tok("r", "a", 1)}) }), err)
	uninit("zero Coordinator Release", noPanic(func() { _, err = c.Release(tok("r", "a", 1)) }), err)
	within(t, "IssuedFence of a zero Coordinator (mutex left locked?)", func() { _ = c.IssuedFence() })

	var cl leasefence.Client
	uninit("zero Client BeginAcquire", noPanic(func() { _, err = cl.BeginAcquire("r") }), err)
	uninit("zero Client BeginRenewal", noPanic(func() { _, err = cl.BeginRenewal(&leasefence.Lease{Token: tok("r", "", 1)}) }), err)
	uninit("zero Client CompleteAcquire", noPanic(func() { _, err = cl.CompleteAcquire(leasefence.AcquireRequest{RequestID: "x"}, leasefence.Grant{}) }), err)
}

// TestCoordinatorHugeTTL: a TTL whose expiry would overflow the clock's
// arithmetic is refused at construction, or the lease it grants holds the
// resource: never an expiry wrapped into the past that lets a second holder
// in at once.
func TestCoordinatorHugeTTL(t *testing.T) {
	for _, ttl := range []time.Duration{math.MaxInt64, math.MaxInt64 - time.Second, math.MaxInt64 / 2, leasefence.MaxTTL + 1, leasefence.MaxTTL} {
		clock := leasefence.NewManualClock("coord", leasefence.WithStart(time.Hour))
		c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
		if (err != nil) != (ttl > leasefence.MaxTTL) || err != nil && !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("NewCoordinator(TTL %v) = %v; want ErrInvalidRequest exactly above MaxTTL %v", ttl, err, leasefence.MaxTTL)
		}
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
	clock := leasefence.NewManualClock("coord", leasefence.WithStart(math.MaxInt64-time.Minute-time.Second))
	c := newCoordinator(t, clock, time.Minute)
	a, err := c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"})
	if err != nil || !a.OK {
		t.Fatalf("Acquire a second before the last reading that can be dated = %+v, %v", a, err)
	}
	clock.Advance(2 * time.Second)
	// Reading + TTL overflows now: nothing is granted, renewed or minted.
	b, err := c.Acquire(leasefence.AcquireRequest{RequestID: "2", Holder: "b", Resource: "r2"})
	if !errors.Is(err, leasefence.ErrOutOfRange) || b.OK {
		t.Errorf("Acquire past the end of the clock = %+v, %v; want ErrOutOfRange", b, err)
	}
	r, err := c.Renew(leasefence.RenewRequest{RequestID: "3", Token: a.Grant.Token})
	if !errors.Is(err, leasefence.ErrOutOfRange) || r.OK {
		t.Errorf("Renew past the end of the clock = %+v, %v; want ErrOutOfRange", r, err)
	}
	if got := c.IssuedFence(); got != 1 {
		t.Errorf("IssuedFence() = %d, want 1: a refused acquire mints nothing", got)
	}
	// a's lease is still a's: the expiry did not wrap into the past.
	b, err = c.Acquire(leasefence.AcquireRequest{RequestID: "4", Holder: "b", Resource: "r"})
	if err == nil && b.OK {
		t.Errorf("a second holder was granted %v while %v is live (expiry %v)", b.Grant.Token, a.Grant.Token, a.Grant.CoordinatorExpiresAt)
	}
}

// TestClientDeadlineArithmetic: a skew above MaxClockSkew is refused at
// construction, and a deadline that would overflow is ErrOutOfRange, not a
// deadline wrapped into the past or the future.
func TestClientDeadlineArithmetic(t *testing.T) {
	for _, skew := range []time.Duration{leasefence.MaxClockSkew + 1, math.MaxInt64} {
		_, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewManualClock("c"), Holder: "a", ClockSkew: skew})
		if !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("NewClient(ClockSkew %v) = %v, want ErrInvalidRequest", skew, err)
		}
	}
	clock := leasefence.NewManualClock("c", leasefence.WithStart(math.MaxInt64-time.Minute))
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "a", ClockSkew: leasefence.MaxClockSkew})
	if err != nil {
		t.Fatal(err)
	}
	req, err := client.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	g := leasefence.Grant{RequestID: req.RequestID, Token: tok("r", "a", 1), TTL: time.Hour}
	// TTL - skew is far negative: the lease is dead on arrival, not wrapped.
	l, err := client.CompleteAcquire(req, g)
	if err != nil {
		t.Fatalf("CompleteAcquire with a skew above the TTL = %v", err)
	}
	if expired, err := l.HasExpired(); err != nil || !expired {
		t.Errorf("lease with skew > TTL: HasExpired = %v, %v; want expired", expired, err)
	}

	client = newClient(t, clock, "a", 0)
	req, err = client.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	g.RequestID = req.RequestID
	if _, err := client.CompleteAcquire(req, g); !errors.Is(err, leasefence.ErrOutOfRange) {
		t.Errorf("CompleteAcquire whose deadline overflows = %v, want ErrOutOfRange", err)
	}
	g.TTL = leasefence.MaxTTL + 1
	if _, err := client.CompleteAcquire(req, g); !errors.Is(err, leasefence.ErrGrantMismatch) {
		t.Errorf("CompleteAcquire of a grant above MaxTTL = %v, want ErrGrantMismatch", err)
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
	out, err := c.Acquire(leasefence.AcquireRequest{RequestID: "r1", Holder: "a", Resource: "r1"})
	if err != nil || out.Grant.Token.Fence != math.MaxUint64 {
		t.Fatalf("the last acquire = %+v, %v; want fence MaxUint64", out, err)
	}
	for _, res := range []string{"r2", "r3"} {
		out, err := c.Acquire(leasefence.AcquireRequest{RequestID: res, Holder: "a", Resource: res})
		if !errors.Is(err, leasefence.ErrFencesExhausted) || out.OK {
			t.Errorf("acquire after the last fence = %+v, %v; want ErrFencesExhausted", out, err)
		}
	}
	// The lease under the last fence still renews and releases.
	if r, err := c.Renew(leasefence.RenewRequest{RequestID: "x", Token: out.Grant.Token}); err != nil || !r.OK {
		t.Errorf("Renew under the last fence = %+v, %v", r, err)
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
	if p != nil || !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("NewCoordinator(ReplayCache: MaxInt) panicked with %v, returned %v; want ErrInvalidRequest", p, err)
	}
	if _, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: leasefence.NewManualClock("coord"), TTL: time.Second, ReplayCache: leasefence.MaxReplayCache,
	}); err != nil {
		t.Errorf("NewCoordinator(ReplayCache: MaxReplayCache) = %v", err)
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
	if len(rs) != leasefence.DefaultRejectionLog {
		t.Fatalf("Rejections() retains %d refusals, want DefaultRejectionLog = %d", len(rs), leasefence.DefaultRejectionLog)
	}
	for i, r := range rs {
		if want := uint64(n - leasefence.DefaultRejectionLog + 1 + i); r.Seq != want {
			t.Fatalf("Rejections()[%d].Seq = %d, want %d: the newest, oldest first", i, r.Seq, want)
		}
	}
}

// TestGateRejectionsSince: a bounded log read by sequence number, as a
// poller reads it: each refusal once, and a count of those it lost.
func TestGateRejectionsSince(t *testing.T) {
	g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(9), leasefence.WithRejectionLog(3))
	refuse := func(k int) {
		for range k {
			_ = g.Commit(t.Context(), tok("r", "old", 1), func(context.Context) error { return nil })
		}
	}
	seqs := func(rs []leasefence.Rejection) (out []uint64) {
		for _, r := range rs {
			out = append(out, r.Seq)
		}
		return out
	}
	type read struct {
		since  uint64
		seqs   []uint64
		missed uint64
	}
	check := func(reads ...read) {
		t.Helper()
		for _, rd := range reads {
			rs, missed := g.RejectionsSince(rd.since)
			if got := seqs(rs); !slices.Equal(got, rd.seqs) || missed != rd.missed {
				t.Errorf("RejectionsSince(%d) = %v, missed %d; want %v, missed %d", rd.since, got, missed, rd.seqs, rd.missed)
			}
		}
	}
	check(read{0, nil, 0}, read{5, nil, 0}, read{math.MaxUint64, nil, 0})
	refuse(2)
	check(read{0, []uint64{1, 2}, 0}, read{1, []uint64{2}, 0}, read{2, nil, 0}, read{7, nil, 0})
	refuse(5) // 7 logged, 5..7 retained
	check(read{0, []uint64{5, 6, 7}, 4}, read{3, []uint64{5, 6, 7}, 1}, read{4, []uint64{5, 6, 7}, 0},
		read{6, []uint64{7}, 0}, read{7, nil, 0}, read{math.MaxUint64, nil, 0})
	if g.RejectionCount() != 7 || !slices.Equal(seqs(g.Rejections()), []uint64{5, 6, 7}) {
		t.Errorf("RejectionCount() = %d, Rejections() = %v", g.RejectionCount(), g.Rejections())
	}
	wantPanic(t, func() { leasefence.NewFenceGate("r", leasefence.WithRejectionLog(0)) })
	wantPanic(t, func() { leasefence.NewFenceGate("r", leasefence.WithRejectionLog(-1)) })
}

// TestGateEscapedCtxFromAGoroutine: a goroutine that keeps the write's ctx
// and commits with it while the write returns is either handled in place
// before the write is let go (its write runs inside the enclosing one), or
// refused as escaped: never run beside the gate's next write.
func TestGateEscapedCtxFromAGoroutine(t *testing.T) {
	for range 500 {
		g := leasefence.NewFenceGate("r")
		var running atomic.Int32
		write := func(context.Context) error {
			if running.Add(1) > 1 {
				t.Errorf("writes overlap")
			}
			defer running.Add(-1)
			return nil
		}
		escaped := make(chan error, 1)
		if err := g.Commit(t.Context(), tok("r", "a", 1), func(ctx context.Context) error {
			go func() { escaped <- g.Commit(ctx, tok("r", "a", 2), write) }()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := g.Commit(t.Context(), tok("r", "b", 3), write); err != nil {
			t.Fatal(err)
		}
		if err := <-escaped; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, leasefence.ErrStaleFence) {
			t.Errorf("escaped Commit = %v", err)
		}
	}
}

// TestGateNestedWithTheEnclosingCtx: a nested write that commits with its
// enclosing write's context, not its own, waits for itself (the enclosing
// write's nested Commits run one at a time). As documented, that wait ends
// with the context: ctx.Err(), no write, and the gate usable afterwards.
func TestGateNestedWithTheEnclosingCtx(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var inner error
	wrote := false
	within(t, "a nested write committing with its enclosing context", func() {
		err := g.Commit(ctx, tok("r", "a", 1), func(outer context.Context) error {
			return g.Commit(outer, tok("r", "a", 2), func(context.Context) error {
				inner = g.Commit(outer, tok("r", "a", 3), func(context.Context) error { wrote = true; return nil })
				return nil
			})
		})
		if err != nil {
			t.Errorf("Commit = %v", err)
		}
	})
	if !errors.Is(inner, context.DeadlineExceeded) || wrote {
		t.Errorf("the self-waiting Commit = %v (wrote %v), want DeadlineExceeded and no write", inner, wrote)
	}
	if got := g.Floor(); got != tok("r", "a", 2) {
		t.Errorf("Floor() = %v, want a@2", got)
	}
	if err := g.Commit(t.Context(), tok("r", "a", 3), func(context.Context) error { return nil }); err != nil {
		t.Errorf("Commit afterwards = %v", err)
	}
}

// panicClock panics on every reading: a broken Clock implementation.
type panicClock struct{}

func (panicClock) Domain() leasefence.Domain        { return "broken" }
func (panicClock) Now() (leasefence.Instant, error) { panic("clock exploded") }

// TestCoordinatorPanickingClock: a Clock that panics takes the call down,
// not the coordinator: its lock is free afterwards.
func TestCoordinatorPanickingClock(t *testing.T) {
	c := newCoordinator(t, panicClock{}, time.Second)
	if p := noPanic(func() { _, _ = c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"}) }); p == nil {
		t.Fatal("Acquire with a panicking clock did not panic")
	}
	within(t, "IssuedFence after a panicking clock (mutex left locked?)", func() { _ = c.IssuedFence() })
}

// TestZeroSession: every method of a zero Session answers rather than
// panicking. It holds no lease, so it says so the way a lost one does (Err
// matches ErrLeaseLost, Lost is closed, Context is done) and names why
// (ErrUninitialized); Release sends nothing. Each method is called on a
// Session of its own and then again, so that one that panicked holding a
// lock cannot hang the others.
func TestZeroSession(t *testing.T) {
	var err error
	uninit := func(what string, call func(s *leasefence.Session) error) {
		t.Helper()
		s := new(leasefence.Session)
		for range 2 {
			if p := noPanic(func() { err = call(s) }); p != nil || !errors.Is(err, leasefence.ErrUninitialized) || !errors.Is(err, leasefence.ErrLeaseLost) {
				t.Errorf("zero Session %s panicked with %v, returned %v; want ErrUninitialized and ErrLeaseLost", what, p, err)
				return
			}
		}
	}
	// A bounded ctx: a Release that waited for a renewing goroutine there
	// is none of would return ctx's error, not hang.
	bounded, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	uninit("Err", func(s *leasefence.Session) error { return s.Err() })
	uninit("Remaining", func(s *leasefence.Session) error { _, err := s.Remaining(); return err })
	uninit("Release", func(s *leasefence.Session) error { _, err := s.Release(bounded); return err })
	uninit("Context", func(s *leasefence.Session) error {
		ctx := s.Context()
		select {
		case <-ctx.Done():
		default:
			return errors.New("its Context is not done")
		}
		if ctx.Err() == nil {
			return errors.New("its Context is done without an error")
		}
		return context.Cause(ctx)
	})
	uninit("Lost", func(s *leasefence.Session) error {
		select {
		case <-s.Lost():
			return s.Err()
		default:
			return errors.New("its Lost is not closed")
		}
	})
	uninit("readers", func(s *leasefence.Session) error {
		if s.Token() != (leasefence.Token{}) || s.Lease() != (leasefence.Lease{}) || s.TTL() != 0 {
			return fmt.Errorf("readers: %v, %v, %v", s.Token(), s.Lease(), s.TTL())
		}
		return s.Err()
	})
	var s leasefence.Session
	//lint:ignore SA1012 a nil context is the point
	if _, err := s.Release(nil); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("zero Session Release(nil) = %v, want ErrInvalidRequest", err)
	}
}
