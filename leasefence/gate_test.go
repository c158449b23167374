package leasefence_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// guard is how long a test waits for something that should happen at once
// before it calls it a hang. It is a failure guard only: no test's
// correctness depends on it.
const guard = 5 * time.Second

// recv waits for ch, failing the test after guard.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("%s: still waiting after %v", what, guard)
		panic("unreachable")
	}
}

// held is a write running at a gate, blocked until released.
type held struct {
	unblock chan struct{}
	done    chan error
	once    sync.Once
}

// hold starts a Commit of token at g whose write blocks until release, and
// returns once the write is running. during, if non-nil, runs inside the
// write first.
func hold(t *testing.T, g *leasefence.FenceGate, token leasefence.Token, during func(ctx context.Context)) *held {
	t.Helper()
	h := &held{unblock: make(chan struct{}), done: make(chan error, 1)}
	started := make(chan struct{})
	go func() {
		h.done <- g.Commit(context.Background(), token, func(ctx context.Context) error {
			if during != nil {
				during(ctx)
			}
			close(started)
			<-h.unblock
			return nil
		})
	}()
	recv(t, started, "the held write to start")
	t.Cleanup(func() { h.once.Do(func() { close(h.unblock) }) })
	return h
}

// release lets the held write return and returns its Commit's error.
func (h *held) release(t *testing.T) error {
	t.Helper()
	h.once.Do(func() { close(h.unblock) })
	return recv(t, h.done, "the held Commit to return")
}

// waitSignalCtx reports, by closing waiting, the first time Done is called:
// a Commit asks for Done only to wait for a running write, so once waiting
// is closed the Commit is about to block (or is blocked) on it.
type waitSignalCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWaitSignalCtx(parent context.Context) (*waitSignalCtx, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	return &waitSignalCtx{Context: ctx, waiting: make(chan struct{})}, cancel
}

func (c *waitSignalCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

func wantStale(t *testing.T, err error, want leasefence.Rejection) {
	t.Helper()
	var se *leasefence.StaleFenceError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want *StaleFenceError", err, err)
	}
	if !errors.Is(err, leasefence.ErrStaleFence) || errors.Is(err, leasefence.ErrTokenConflict) {
		t.Errorf("errors.Is: ErrStaleFence %v, ErrTokenConflict %v", errors.Is(err, leasefence.ErrStaleFence), errors.Is(err, leasefence.ErrTokenConflict))
	}
	if se.Rejection != want {
		t.Errorf("rejection = %+v\n      want %+v", se.Rejection, want)
	}
}

func wantRejections(t *testing.T, g *leasefence.FenceGate, want ...leasefence.Rejection) {
	t.Helper()
	got := g.Rejections()
	if !slices.Equal(got, want) {
		t.Errorf("Rejections() =\n%+v\nwant\n%+v", got, want)
	}
	if g.RejectionCount() != len(want) {
		t.Errorf("RejectionCount() = %d, want %d", g.RejectionCount(), len(want))
	}
}

func rej(seq uint64, holder string, fence leasefence.Fence, floorHolder string, floorFence leasefence.Fence) leasefence.Rejection {
	return leasefence.Rejection{Seq: seq, Resource: "r", Holder: holder, Fence: fence, FloorHolder: floorHolder, FloorFence: floorFence}
}

func TestGateCommitFloor(t *testing.T) {
	ctx := t.Context()
	g := leasefence.NewFenceGate("r")
	if g.Resource() != "r" {
		t.Fatalf("Resource() = %q", g.Resource())
	}
	if g.Floor() != (leasefence.Token{}) {
		t.Fatalf("Floor() of a new gate = %+v, want the zero Token", g.Floor())
	}
	var writes []leasefence.Token
	commit := func(token leasefence.Token) error {
		return g.Commit(ctx, token, func(context.Context) error { writes = append(writes, token); return nil })
	}
	type step struct {
		token     leasefence.Token
		want      *leasefence.Rejection // nil: admitted
		wantFloor leasefence.Token
	}
	steps := []step{
		{tok("r", "a", 3), nil, tok("r", "a", 3)},
		{tok("r", "a", 3), nil, tok("r", "a", 3)}, // same token again: admitted
		{tok("r", "b", 2), &leasefence.Rejection{Seq: 1, Resource: "r", Holder: "b", Fence: 2, FloorHolder: "a", FloorFence: 3}, tok("r", "a", 3)},
		{tok("r", "b", 5), nil, tok("r", "b", 5)}, // gaps are fine
		{tok("r", "a", 3), &leasefence.Rejection{Seq: 2, Resource: "r", Holder: "a", Fence: 3, FloorHolder: "b", FloorFence: 5}, tok("r", "b", 5)},
		{tok("r", "c", 1), &leasefence.Rejection{Seq: 3, Resource: "r", Holder: "c", Fence: 1, FloorHolder: "b", FloorFence: 5}, tok("r", "b", 5)},
		{tok("r", "b", 5), nil, tok("r", "b", 5)},
		{tok("r", "a", 6), nil, tok("r", "a", 6)},
	}
	var wantWrites []leasefence.Token
	var wantLog []leasefence.Rejection
	for n, s := range steps {
		if got := g.WouldAdmit(s.token); got != (s.want == nil) {
			t.Errorf("step %d: WouldAdmit(%v) = %v", n, s.token, got)
		}
		err := commit(s.token)
		if s.want == nil {
			if err != nil {
				t.Fatalf("step %d: Commit(%v) = %v, want admitted", n, s.token, err)
			}
			wantWrites = append(wantWrites, s.token)
		} else {
			wantStale(t, err, *s.want)
			wantLog = append(wantLog, *s.want)
		}
		if g.Floor() != s.wantFloor {
			t.Fatalf("step %d: Floor() = %+v, want %+v", n, g.Floor(), s.wantFloor)
		}
	}
	if !slices.Equal(writes, wantWrites) {
		t.Errorf("writes = %v, want %v", writes, wantWrites)
	}
	wantRejections(t, g, wantLog...)
}

func TestGateRefusalsThatAreNotStale(t *testing.T) {
	ctx := t.Context()
	g := leasefence.NewFenceGate("r")
	if err := g.Commit(ctx, tok("r", "a", 4), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	wrote := false
	write := func(context.Context) error { wrote = true; return nil }

	t.Run("wrong resource, not logged", func(t *testing.T) {
		for _, token := range []leasefence.Token{tok("other", "a", 9), tok("", "a", 9), tok("other", "a", 1)} {
			err := g.Commit(ctx, token, write)
			if !errors.Is(err, leasefence.ErrWrongResource) || errors.Is(err, leasefence.ErrStaleFence) {
				t.Errorf("Commit(%v) = %v, want ErrWrongResource", token, err)
			}
			if err := g.Admit(token); !errors.Is(err, leasefence.ErrWrongResource) {
				t.Errorf("Admit(%v) = %v, want ErrWrongResource", token, err)
			}
			if g.WouldAdmit(token) {
				t.Errorf("WouldAdmit(%v) = true", token)
			}
		}
		wantRejections(t, g)
	})

	t.Run("malformed token, not logged", func(t *testing.T) {
		for _, token := range []leasefence.Token{tok("r", "", 9), tok("r", "a", 0)} {
			if err := g.Commit(ctx, token, write); !errors.Is(err, leasefence.ErrInvalidRequest) {
				t.Errorf("Commit(%v) = %v, want ErrInvalidRequest", token, err)
			}
			if err := g.Admit(token); !errors.Is(err, leasefence.ErrInvalidRequest) {
				t.Errorf("Admit(%v) = %v, want ErrInvalidRequest", token, err)
			}
			if g.WouldAdmit(token) {
				t.Errorf("WouldAdmit(%v) = true", token)
			}
		}
		wantRejections(t, g)
	})

	t.Run("same fence, other holder: conflict, logged", func(t *testing.T) {
		err := g.Commit(ctx, tok("r", "b", 4), write)
		if !errors.Is(err, leasefence.ErrTokenConflict) || errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("Commit = %v, want ErrTokenConflict", err)
		}
		if g.WouldAdmit(tok("r", "b", 4)) {
			t.Errorf("WouldAdmit(b@4) = true")
		}
		wantRejections(t, g, rej(1, "b", 4, "a", 4))
		// Admit of the same is refused too, and not logged.
		if err := g.Admit(tok("r", "b", 4)); !errors.Is(err, leasefence.ErrTokenConflict) {
			t.Errorf("Admit = %v, want ErrTokenConflict", err)
		}
		wantRejections(t, g, rej(1, "b", 4, "a", 4))
	})

	if wrote {
		t.Errorf("a refused Commit ran its write")
	}
	if g.Floor() != tok("r", "a", 4) {
		t.Errorf("Floor() = %v", g.Floor())
	}
}

func TestGateFloorRaisedBeforeTheWrite(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	ctx := t.Context()
	var during leasefence.Token
	var wouldOld, wouldSame bool
	err := g.Commit(ctx, tok("r", "b", 7), func(context.Context) error {
		during = g.Floor()
		wouldOld = g.WouldAdmit(tok("r", "a", 6))
		wouldSame = g.WouldAdmit(tok("r", "b", 7))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != tok("r", "b", 7) {
		t.Errorf("Floor() inside the write = %v, want b@7: the floor must be raised before the write runs", during)
	}
	if wouldOld || !wouldSame {
		t.Errorf("inside the write: WouldAdmit(a@6) = %v, WouldAdmit(b@7) = %v", wouldOld, wouldSame)
	}
}

func TestGateFloorStaysRaised(t *testing.T) {
	errBoom := errors.New("disk full halfway through")
	tests := []struct {
		name  string
		write func(context.Context) error
		check func(t *testing.T, commit func() error)
	}{
		{
			name:  "write returns an error",
			write: func(context.Context) error { return fmt.Errorf("applying: %w", errBoom) },
			check: func(t *testing.T, commit func() error) {
				err := commit()
				if !errors.Is(err, errBoom) || errors.Is(err, leasefence.ErrStaleFence) {
					t.Errorf("Commit = %v, want the write's error", err)
				}
			},
		},
		{
			name:  "write panics",
			write: func(context.Context) error { panic(errBoom) },
			check: func(t *testing.T, commit func() error) {
				defer func() {
					if r := recover(); r != errBoom {
						t.Errorf("recovered %v, want the write's panic value", r)
					}
				}()
				commit()
				t.Errorf("Commit returned: the panic did not propagate")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := leasefence.NewFenceGate("r")
			ctx := t.Context()
			if err := g.Commit(ctx, tok("r", "a", 1), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			tt.check(t, func() error { return g.Commit(ctx, tok("r", "b", 2), tt.write) })
			if g.Floor() != tok("r", "b", 2) {
				t.Errorf("Floor() = %v, want b@2 still raised", g.Floor())
			}
			// The older holder is refused...
			wantStale(t, g.Commit(ctx, tok("r", "a", 1), func(context.Context) error { return nil }), rej(1, "a", 1, "b", 2))
			// ...and the gate is usable: no write is stuck holding it.
			done := make(chan error, 1)
			go func() { done <- g.Commit(ctx, tok("r", "b", 2), func(context.Context) error { return nil }) }()
			if err := recv(t, done, "a Commit after the failed write"); err != nil {
				t.Errorf("Commit after the failed write = %v", err)
			}
		})
	}
}

// TestGateWritesNeverOverlap: many goroutines commit tokens with fences from
// a small range. The writes append to a plain slice without a lock of their
// own, so -race also checks that the gate's exclusion is real.
func TestGateWritesNeverOverlap(t *testing.T) {
	const goroutines, each = 8, 300
	g := leasefence.NewFenceGate("r")
	ctx := t.Context()
	var inFlight atomic.Int32
	var overlapped atomic.Bool
	var admitted []leasefence.Fence // written only inside admitted writes
	var refused atomic.Int64
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			for n := range each {
				f := leasefence.Fence(1 + (w*7+n*3)%16 + n/20)
				token := tok("r", fmt.Sprint("h", f), f) // one holder per fence: no conflicts
				err := g.Commit(ctx, token, func(context.Context) error {
					if inFlight.Add(1) != 1 {
						overlapped.Store(true)
					}
					admitted = append(admitted, f)
					runtime.Gosched()
					inFlight.Add(-1)
					return nil
				})
				switch {
				case err == nil:
				case errors.Is(err, leasefence.ErrStaleFence):
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if overlapped.Load() {
		t.Errorf("two admitted writes ran at once")
	}
	if !slices.IsSorted(admitted) {
		t.Errorf("admitted fences went down: %v", admitted)
	}
	if int64(len(admitted))+refused.Load() != goroutines*each {
		t.Errorf("%d admitted + %d refused != %d commits", len(admitted), refused.Load(), goroutines*each)
	}
	log := g.Rejections()
	if int64(len(log)) != refused.Load() {
		t.Fatalf("%d rejections logged, %d refused", len(log), refused.Load())
	}
	for n, r := range log {
		if r.Seq != uint64(n+1) || r.Fence >= r.FloorFence || r.Holder != fmt.Sprint("h", r.Fence) || r.FloorHolder != fmt.Sprint("h", r.FloorFence) {
			t.Fatalf("rejection %d = %+v", n, r)
		}
	}
	if last := admitted[len(admitted)-1]; g.Floor() != tok("r", fmt.Sprint("h", last), last) {
		t.Errorf("Floor() = %v, last admitted %d", g.Floor(), last)
	}
}

type ctxKey struct{}

func TestGateNestedCommit(t *testing.T) {
	tests := []struct {
		name      string
		nested    leasefence.Token
		derive    func(ctx context.Context) context.Context
		wantErr   error // nil: admitted and written in place
		wantFloor leasefence.Token
		wantLog   []leasefence.Rejection
	}{
		{name: "older fence refused and logged", nested: tok("r", "old", 4),
			wantErr: leasefence.ErrStaleFence, wantFloor: tok("r", "a", 5), wantLog: []leasefence.Rejection{rej(1, "old", 4, "a", 5)}},
		{name: "same token admitted", nested: tok("r", "a", 5), wantFloor: tok("r", "a", 5)},
		{name: "newer fence admitted and raises the floor", nested: tok("r", "b", 6), wantFloor: tok("r", "b", 6)},
		{name: "same fence other holder is a conflict", nested: tok("r", "b", 5),
			wantErr: leasefence.ErrTokenConflict, wantFloor: tok("r", "a", 5), wantLog: []leasefence.Rejection{rej(1, "b", 5, "a", 5)}},
		{name: "derived ctx: older fence refused", nested: tok("r", "old", 1),
			derive: func(ctx context.Context) context.Context {
				ctx, cancel := context.WithTimeout(context.WithValue(ctx, ctxKey{}, 1), time.Hour)
				_ = cancel // released with the parent
				return ctx
			},
			wantErr: leasefence.ErrStaleFence, wantFloor: tok("r", "a", 5), wantLog: []leasefence.Rejection{rej(1, "old", 1, "a", 5)}},
		{name: "derived ctx: newer admitted", nested: tok("r", "c", 9),
			derive:    func(ctx context.Context) context.Context { return context.WithValue(ctx, ctxKey{}, 1) },
			wantFloor: tok("r", "c", 9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := leasefence.NewFenceGate("r")
			var order []string
			var nestedErr error
			var floorInNested leasefence.Token
			outer := func(ctx context.Context) error {
				order = append(order, "outer start")
				nctx := ctx
				if tt.derive != nil {
					nctx = tt.derive(ctx)
				}
				nestedErr = g.Commit(nctx, tt.nested, func(context.Context) error {
					floorInNested = g.Floor()
					order = append(order, "nested write")
					return nil
				})
				order = append(order, "outer end")
				return nil
			}
			done := make(chan error, 1)
			go func() { done <- g.Commit(t.Context(), tok("r", "a", 5), outer) }()
			if err := recv(t, done, "the outer Commit (a nested Commit deadlocked?)"); err != nil {
				t.Fatalf("outer Commit = %v", err)
			}
			wantOrder := []string{"outer start", "nested write", "outer end"}
			if tt.wantErr != nil {
				wantOrder = []string{"outer start", "outer end"}
				if !errors.Is(nestedErr, tt.wantErr) {
					t.Errorf("nested Commit = %v, want %v", nestedErr, tt.wantErr)
				}
			} else {
				if nestedErr != nil {
					t.Errorf("nested Commit = %v, want admitted", nestedErr)
				}
				if floorInNested != tt.nested {
					t.Errorf("Floor() inside the nested write = %v, want %v", floorInNested, tt.nested)
				}
			}
			if !slices.Equal(order, wantOrder) {
				t.Errorf("order = %v, want %v", order, wantOrder)
			}
			if g.Floor() != tt.wantFloor {
				t.Errorf("Floor() = %v, want %v", g.Floor(), tt.wantFloor)
			}
			wantRejections(t, g, tt.wantLog...)
		})
	}
}

func TestGateNestedCommitErrorsAndPanics(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	errInner := errors.New("inner")
	err := g.Commit(t.Context(), tok("r", "a", 1), func(ctx context.Context) error {
		if err := g.Commit(ctx, tok("r", "a", 2), func(context.Context) error { return errInner }); !errors.Is(err, errInner) {
			t.Errorf("nested Commit = %v, want the nested write's error", err)
		}
		func() {
			defer func() {
				if r := recover(); r != "inner panic" {
					t.Errorf("recovered %v", r)
				}
			}()
			g.Commit(ctx, tok("r", "a", 3), func(context.Context) error { panic("inner panic") })
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if g.Floor() != tok("r", "a", 3) {
		t.Errorf("Floor() = %v, want a@3: raised before the nested writes, kept after they failed", g.Floor())
	}
	if err := g.Commit(t.Context(), tok("r", "a", 3), func(context.Context) error { return nil }); err != nil {
		t.Errorf("Commit after the nested failures = %v", err)
	}
}

func TestGateCommitFromInsideWithAnotherCtx(t *testing.T) {
	// A Commit from inside a write with a ctx that is not the write's is
	// not nested: a stale one is still refused at once (no wait), and an
	// admissible one waits, so it can only end by its ctx.
	g := leasefence.NewFenceGate("r")
	err := g.Commit(t.Context(), tok("r", "a", 5), func(context.Context) error {
		// The guard only turns a would-be deadlock into a failure.
		guardCtx, cancelGuard := context.WithTimeout(context.Background(), guard)
		defer cancelGuard()
		err := g.Commit(guardCtx, tok("r", "old", 4), func(context.Context) error { return nil })
		wantStale(t, err, rej(1, "old", 4, "a", 5))

		ctx, cancel := context.WithCancel(context.Background())
		go cancel() // whether it waits first or not, it ends with ctx.Err()
		wrote := false
		err = g.Commit(ctx, tok("r", "b", 6), func(context.Context) error { wrote = true; return nil })
		if !errors.Is(err, context.Canceled) || wrote {
			t.Errorf("Commit = %v (wrote %v), want context.Canceled and no write", err, wrote)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if g.Floor() != tok("r", "a", 5) {
		t.Errorf("Floor() = %v, want a@5 untouched", g.Floor())
	}
}

func TestGateCtxCancelledWhileWaiting(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	h := hold(t, g, tok("r", "a", 1), nil)

	ctx, cancel := newWaitSignalCtx(t.Context())
	defer cancel()
	wrote := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- g.Commit(ctx, tok("r", "b", 2), func(context.Context) error { wrote <- struct{}{}; return nil })
	}()
	recv(t, ctx.waiting, "the Commit to wait for the running write")
	cancel()
	if err := recv(t, done, "the cancelled Commit"); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit = %v, want context.Canceled", err)
	}
	if g.Floor() != tok("r", "a", 1) {
		t.Errorf("Floor() = %v, want a@1 untouched", g.Floor())
	}
	if err := h.release(t); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wrote:
		t.Errorf("the cancelled Commit wrote")
	default:
	}
	wantRejections(t, g)
	// The cancelled waiter left nothing behind: the gate is free.
	if err := g.Commit(t.Context(), tok("r", "a", 1), func(context.Context) error { return nil }); err != nil {
		t.Errorf("Commit afterwards = %v", err)
	}
}

func TestGateDeadlineWhileWaiting(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	h := hold(t, g, tok("r", "a", 1), nil)
	// The deadline decides nothing but which error comes back.
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	err := g.Commit(ctx, tok("r", "a", 1), func(context.Context) error { t.Error("wrote"); return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Commit = %v, want context.DeadlineExceeded", err)
	}
	if err := h.release(t); err != nil {
		t.Fatal(err)
	}
}

func TestGateCtxAlreadyDone(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"deadline passed", expired, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(3))
			err := g.Commit(tt.ctx, tok("r", "a", 4), func(context.Context) error { t.Error("wrote"); return nil })
			if !errors.Is(err, tt.want) {
				t.Errorf("Commit = %v, want %v", err, tt.want)
			}
			if g.Floor() != (leasefence.Token{Resource: "r", Fence: 3}) {
				t.Errorf("Floor() = %v, want untouched", g.Floor())
			}
			wantRejections(t, g)
		})
	}
}

func TestGateStaleRefusedWithoutWaiting(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	if err := g.Commit(t.Context(), tok("r", "a", 3), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h := hold(t, g, tok("r", "b", 5), nil)

	tests := []struct {
		name  string
		token leasefence.Token
		want  error
	}{
		{"below the floor", tok("r", "a", 3), leasefence.ErrStaleFence},
		{"same fence other holder", tok("r", "c", 5), leasefence.ErrTokenConflict},
		{"wrong resource", tok("x", "b", 9), leasefence.ErrWrongResource},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				done <- g.Commit(t.Context(), tt.token, func(context.Context) error { return nil })
			}()
			if err := recv(t, done, "the refusal while a write runs"); !errors.Is(err, tt.want) {
				t.Errorf("Commit = %v, want %v", err, tt.want)
			}
		})
	}
	wantRejections(t, g, rej(1, "a", 3, "b", 5), rej(2, "c", 5, "b", 5))
	if err := h.release(t); err != nil {
		t.Fatal(err)
	}
}

func TestGateReadersNeverWait(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	g.Commit(t.Context(), tok("r", "z", 2), func(context.Context) error { return nil })
	g.Commit(t.Context(), tok("r", "z", 1), func(context.Context) error { return nil })

	type reading struct {
		floor  leasefence.Token
		would  bool
		log    []leasefence.Rejection
		admit  error
		floor2 leasefence.Token
	}
	read := func(admitted leasefence.Token) reading {
		var r reading
		r.floor = g.Floor()
		r.would = g.WouldAdmit(tok("r", "a", 3))
		r.log = g.Rejections()
		r.admit = g.Admit(admitted)
		r.floor2 = g.Floor()
		return r
	}

	// From inside the write: waiting would deadlock.
	var inside reading
	h := hold(t, g, tok("r", "a", 3), func(context.Context) { inside = read(tok("r", "a", 3)) })
	wantLog := []leasefence.Rejection{rej(1, "z", 1, "z", 2)}
	if inside.floor != tok("r", "a", 3) || !inside.would || !slices.Equal(inside.log, wantLog) || inside.admit != nil || inside.floor2 != tok("r", "a", 3) {
		t.Errorf("read from inside the write = %+v", inside)
	}

	// From another goroutine while the write is blocked.
	done := make(chan reading, 1)
	go func() { done <- read(tok("r", "b", 4)) }()
	outside := recv(t, done, "readers while a write runs")
	if outside.floor != tok("r", "a", 3) || !outside.would || !slices.Equal(outside.log, wantLog) || outside.admit != nil || outside.floor2 != tok("r", "b", 4) {
		t.Errorf("read from another goroutine = %+v", outside)
	}
	if err := h.release(t); err != nil {
		t.Fatal(err)
	}
	// The running writer's fence was overtaken by the Admit.
	wantStale(t, g.Commit(t.Context(), tok("r", "a", 3), func(context.Context) error { return nil }), rej(2, "a", 3, "b", 4))
}

func TestGateRefusedAfterWaitingPassesTheTurnOn(t *testing.T) {
	// c@2 waits behind a@1; during a's write, b@3 is admitted by a push, so
	// when c@2 gets its turn it is refused, and must hand the turn to b@3
	// waiting behind it.
	g := leasefence.NewFenceGate("r")
	h := hold(t, g, tok("r", "a", 1), nil)

	cctx, cancelC := newWaitSignalCtx(t.Context())
	defer cancelC()
	cDone := make(chan error, 1)
	go func() {
		cDone <- g.Commit(cctx, tok("r", "c", 2), func(context.Context) error { t.Error("c wrote"); return nil })
	}()
	recv(t, cctx.waiting, "c to wait")

	bctx, cancelB := newWaitSignalCtx(t.Context())
	defer cancelB()
	bDone := make(chan error, 1)
	go func() {
		bDone <- g.Commit(bctx, tok("r", "b", 3), func(context.Context) error { return nil })
	}()
	recv(t, bctx.waiting, "b to wait")

	if err := g.Admit(tok("r", "b", 3)); err != nil {
		t.Fatal(err)
	}
	if err := h.release(t); err != nil {
		t.Fatal(err)
	}
	wantStale(t, recv(t, cDone, "c's refusal"), rej(1, "c", 2, "b", 3))
	if err := recv(t, bDone, "b's write after c's refusal"); err != nil {
		t.Errorf("b's Commit = %v", err)
	}
}

func TestGateInitialFloor(t *testing.T) {
	ctx := t.Context()
	g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(10))
	initial := leasefence.Token{Resource: "r", Fence: 10}
	if g.Floor() != initial {
		t.Fatalf("Floor() = %+v, want %+v", g.Floor(), initial)
	}
	nop := func(context.Context) error { return nil }

	wantStale(t, g.Commit(ctx, tok("r", "a", 9), nop), rej(1, "a", 9, "", 10))
	wantStale(t, g.Commit(ctx, tok("r", "b", 1), nop), rej(2, "b", 1, "", 10))
	if g.Floor() != initial {
		t.Fatalf("Floor() after refusals = %+v", g.Floor())
	}
	// Fence 10 itself: any holder may be the first.
	for _, h := range []string{"a", "b"} {
		if !g.WouldAdmit(tok("r", h, 10)) {
			t.Errorf("WouldAdmit(%s@10) = false before anyone wrote", h)
		}
	}
	// Admit below the floor is not a write and changes nothing.
	if err := g.Admit(tok("r", "x", 3)); !errors.Is(err, leasefence.ErrStaleFence) || g.Floor() != initial {
		t.Errorf("Admit(x@3) = %v, Floor() %v", err, g.Floor())
	}
	if err := g.Commit(ctx, tok("r", "b", 10), nop); err != nil {
		t.Fatalf("Commit(b@10) = %v", err)
	}
	if g.Floor() != tok("r", "b", 10) {
		t.Errorf("Floor() = %v, want b@10", g.Floor())
	}
	// Now fence 10 belongs to b.
	if err := g.Commit(ctx, tok("r", "a", 10), nop); !errors.Is(err, leasefence.ErrTokenConflict) {
		t.Errorf("Commit(a@10) = %v, want ErrTokenConflict", err)
	}
	if err := g.Commit(ctx, tok("r", "a", 11), nop); err != nil {
		t.Errorf("Commit(a@11) = %v", err)
	}
	wantRejections(t, g, rej(1, "a", 9, "", 10), rej(2, "b", 1, "", 10), rej(3, "a", 10, "b", 10))

	t.Run("zero initial floor is no floor", func(t *testing.T) {
		g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(0))
		if g.Floor() != (leasefence.Token{}) {
			t.Errorf("Floor() = %+v", g.Floor())
		}
		if err := g.Commit(ctx, tok("r", "a", 1), nop); err != nil {
			t.Error(err)
		}
	})
	t.Run("Admit at the initial floor claims it", func(t *testing.T) {
		g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(5))
		if err := g.Admit(tok("r", "b", 5)); err != nil || g.Floor() != tok("r", "b", 5) {
			t.Fatalf("Admit(b@5) = %v, Floor() %v", err, g.Floor())
		}
		if err := g.Commit(ctx, tok("r", "a", 5), nop); !errors.Is(err, leasefence.ErrTokenConflict) {
			t.Errorf("Commit(a@5) = %v, want ErrTokenConflict", err)
		}
	})
}

func TestGateAdmit(t *testing.T) {
	ctx := t.Context()
	g := leasefence.NewFenceGate("r")
	if err := g.Commit(ctx, tok("r", "a", 2), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}

	// Raises the floor without writing.
	if err := g.Admit(tok("r", "b", 5)); err != nil {
		t.Fatalf("Admit(b@5) = %v", err)
	}
	if g.Floor() != tok("r", "b", 5) {
		t.Errorf("Floor() = %v, want b@5", g.Floor())
	}
	// Admit again is fine and changes nothing.
	if err := g.Admit(tok("r", "b", 5)); err != nil || g.Floor() != tok("r", "b", 5) {
		t.Errorf("repeated Admit = %v, Floor() %v", err, g.Floor())
	}

	// Below the floor: nothing changes, nothing is logged, Seq 0.
	for _, token := range []leasefence.Token{tok("r", "a", 2), tok("r", "c", 4), tok("r", "b", 1)} {
		err := g.Admit(token)
		wantStale(t, err, leasefence.Rejection{Seq: 0, Resource: "r", Holder: token.Holder, Fence: token.Fence, FloorHolder: "b", FloorFence: 5})
		if g.Floor() != tok("r", "b", 5) {
			t.Errorf("Admit(%v) moved the floor to %v", token, g.Floor())
		}
	}
	wantRejections(t, g)

	// The holder that wrote before the push is refused; the pushed one writes.
	wantStale(t, g.Commit(ctx, tok("r", "a", 2), func(context.Context) error { return nil }), rej(1, "a", 2, "b", 5))
	if err := g.Commit(ctx, tok("r", "b", 5), func(context.Context) error { return nil }); err != nil {
		t.Errorf("Commit(b@5) after Admit = %v", err)
	}
	wantRejections(t, g, rej(1, "a", 2, "b", 5))
}

func TestGateRejectionsIsACopy(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	if got := g.Rejections(); len(got) != 0 {
		t.Fatalf("new gate: %v", got)
	}
	nop := func(context.Context) error { return nil }
	g.Commit(t.Context(), tok("r", "b", 3), nop)
	g.Commit(t.Context(), tok("r", "a", 1), nop)
	g.Commit(t.Context(), tok("r", "a", 2), nop)
	got := g.Rejections()
	want := []leasefence.Rejection{rej(1, "a", 1, "b", 3), rej(2, "a", 2, "b", 3)}
	if !slices.Equal(got, want) {
		t.Fatalf("Rejections() = %+v", got)
	}
	got[0].Holder = "mallory"
	got[1] = leasefence.Rejection{}
	_ = append(got[:1], rej(9, "x", 1, "x", 1))
	wantRejections(t, g, want...)
	// And the gate's next append does not write into the copy.
	snapshot := g.Rejections()
	g.Commit(t.Context(), tok("r", "a", 1), nop)
	if len(snapshot) != 2 {
		t.Errorf("earlier copy grew to %d", len(snapshot))
	}
}

func TestGateEscapedCtxIsCancelled(t *testing.T) {
	// Keeping the write's ctx is misuse; what the package documents is that
	// it reports Canceled once the write has returned.
	g := leasefence.NewFenceGate("r")
	parent := context.WithValue(t.Context(), ctxKey{}, "v")
	var kept context.Context
	var inside error
	var value any
	if err := g.Commit(parent, tok("r", "a", 1), func(ctx context.Context) error {
		kept = ctx
		inside = ctx.Err()
		value = ctx.Value(ctxKey{})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inside != nil || value != "v" {
		t.Errorf("inside the write: Err %v, Value %v; want nil, the parent's value", inside, value)
	}
	if !errors.Is(kept.Err(), context.Canceled) {
		t.Errorf("escaped ctx Err() = %v, want context.Canceled", kept.Err())
	}
	select {
	case <-kept.Done():
	default:
		t.Errorf("escaped ctx is not done")
	}
}

func TestGateWriteCtxCarriesTheCommitCtx(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.WithValue(t.Context(), ctxKey{}, 42), deadline)
	defer cancel()
	err := g.Commit(ctx, tok("r", "a", 1), func(wctx context.Context) error {
		if d, ok := wctx.Deadline(); !ok || !d.Equal(deadline) {
			t.Errorf("Deadline() = %v, %v", d, ok)
		}
		if wctx.Value(ctxKey{}) != 42 {
			t.Errorf("Value = %v", wctx.Value(ctxKey{}))
		}
		cancel() // the caller cancels mid-write: the write sees it
		select {
		case <-wctx.Done():
		case <-time.After(guard):
			t.Errorf("write ctx not done after the Commit ctx was cancelled")
		}
		return wctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Commit = %v, want the write's context.Canceled", err)
	}
	if g.Floor() != tok("r", "a", 1) {
		t.Errorf("Floor() = %v", g.Floor())
	}
}

func TestNewFenceGateEmptyResourcePanics(t *testing.T) {
	wantPanic(t, func() { leasefence.NewFenceGate("") })
}

func TestGateTrace(t *testing.T) {
	var commits []leasefence.CommitInfo
	var admits []leasefence.AdmitInfo
	clock := leasefence.NewManualClock("gate", leasefence.WithStepPerRead(ms(1)))
	g := leasefence.NewFenceGate("r", leasefence.WithGateClock(clock), leasefence.WithGateTrace(&leasefence.GateTrace{
		Commit: func(i leasefence.CommitInfo) { commits = append(commits, i) },
		Admit:  func(i leasefence.AdmitInfo) { admits = append(admits, i) },
	}))
	if g == nil {
		t.Fatal("nil gate")
	}
	ctx := t.Context()
	errW := errors.New("w")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	g.Commit(ctx, tok("r", "a", 2), func(context.Context) error { return nil })       // 0 admitted
	g.Commit(ctx, tok("r", "b", 1), func(context.Context) error { return nil })       // 1 refused
	g.Commit(ctx, tok("r", "a", 2), func(context.Context) error { return errW })      // 2 admitted, error
	g.Commit(ctx, tok("x", "a", 9), func(context.Context) error { return nil })       // wrong resource: not reported
	g.Commit(cancelled, tok("r", "a", 3), func(context.Context) error { return nil }) // ctx done: not reported
	g.Admit(tok("r", "c", 4))                                                         // admit 0
	g.Admit(tok("r", "a", 2))                                                         // admit 1, stale
	g.Commit(ctx, tok("r", "c", 4), func(wctx context.Context) error {                // 4 (reported after 3)
		return g.Commit(wctx, tok("r", "a", 2), func(context.Context) error { return nil }) // 3 nested refused
	})
	func() {
		defer func() { recover() }()
		g.Commit(ctx, tok("r", "c", 4), func(context.Context) error { panic("p") }) // 5 panicked
	}()

	if len(commits) != 6 {
		t.Fatalf("%d commits reported, want 6: %+v", len(commits), commits)
	}
	type want struct {
		token    leasefence.Token
		admitted bool
		nested   bool
		floor    leasefence.Token
		rej      leasefence.Rejection
		err      error
		panicked bool
	}
	wants := []want{
		{token: tok("r", "a", 2), admitted: true, floor: leasefence.Token{}},
		{token: tok("r", "b", 1), floor: tok("r", "a", 2), rej: rej(1, "b", 1, "a", 2), err: leasefence.ErrStaleFence},
		{token: tok("r", "a", 2), admitted: true, floor: tok("r", "a", 2), err: errW},
		{token: tok("r", "a", 2), nested: true, floor: tok("r", "c", 4), rej: rej(2, "a", 2, "c", 4), err: leasefence.ErrStaleFence},
		{token: tok("r", "c", 4), admitted: true, floor: tok("r", "c", 4), err: leasefence.ErrStaleFence},
		{token: tok("r", "c", 4), admitted: true, floor: tok("r", "c", 4), panicked: true},
	}
	for n, w := range wants {
		c := commits[n]
		if c.Token != w.token || c.Admitted != w.admitted || c.Nested != w.nested || c.Floor != w.floor ||
			c.Rejection != w.rej || c.Panicked != w.panicked || (w.err == nil) != (c.Err == nil) || (w.err != nil && !errors.Is(c.Err, w.err)) {
			t.Errorf("commit %d reported %+v\nwant %+v", n, c, w)
		}
		if c.Start.Domain() != "gate" || c.End.Domain() != "gate" {
			t.Errorf("commit %d: Start %v End %v, want gate readings", n, c.Start, c.End)
			continue
		}
		if d, _ := c.End.Sub(c.Start); d <= 0 {
			t.Errorf("commit %d: End %v not after Start %v", n, c.End, c.Start)
		}
	}
	if commits[0].Start != leasefence.At("gate", 0) {
		t.Errorf("first Start = %v, want gate+0s", commits[0].Start)
	}
	// The nested Commit ran inside the outer one.
	if b, _ := commits[4].Start.Before(commits[3].Start); !b {
		t.Errorf("outer Start %v not before nested Start %v", commits[4].Start, commits[3].Start)
	}
	if b, _ := commits[3].End.Before(commits[4].End); !b {
		t.Errorf("nested End %v not before outer End %v", commits[3].End, commits[4].End)
	}

	if len(admits) != 2 {
		t.Fatalf("%d admits reported: %+v", len(admits), admits)
	}
	a0, a1 := admits[0], admits[1]
	if a0.Token != tok("r", "c", 4) || !a0.Raised || a0.Floor != tok("r", "c", 4) || a0.Err != nil || a0.At.Domain() != "gate" {
		t.Errorf("admit 0 reported %+v", a0)
	}
	if a1.Token != tok("r", "a", 2) || a1.Raised || a1.Floor != tok("r", "c", 4) || !errors.Is(a1.Err, leasefence.ErrStaleFence) {
		t.Errorf("admit 1 reported %+v", a1)
	}
	if b, _ := a0.At.Before(a1.At); !b {
		t.Errorf("admit At %v, %v not increasing", a0.At, a1.At)
	}
}

func TestGateTraceWithoutClock(t *testing.T) {
	var infos []leasefence.CommitInfo
	g := leasefence.NewFenceGate("r", leasefence.WithGateTrace(&leasefence.GateTrace{
		Commit: func(i leasefence.CommitInfo) { infos = append(infos, i) },
	}))
	g.Commit(t.Context(), tok("r", "a", 1), func(context.Context) error { return nil })
	g.Admit(tok("r", "a", 2)) // no Admit hook: nothing happens
	if len(infos) != 1 || !infos[0].Start.IsZero() || !infos[0].End.IsZero() || !infos[0].Admitted || infos[0].Token != tok("r", "a", 1) {
		t.Errorf("reported %+v, want one admitted commit with zero instants", infos)
	}
}

func TestGateTraceHookMayReadTheGate(t *testing.T) {
	var g *leasefence.FenceGate
	var floors []leasefence.Token
	var logs []int
	g = leasefence.NewFenceGate("r", leasefence.WithGateTrace(&leasefence.GateTrace{
		Commit: func(i leasefence.CommitInfo) {
			floors = append(floors, g.Floor())
			logs = append(logs, len(g.Rejections()))
		},
		Admit: func(i leasefence.AdmitInfo) { floors = append(floors, g.Floor()) },
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Commit(t.Context(), tok("r", "a", 2), func(context.Context) error { return nil })
		g.Commit(t.Context(), tok("r", "a", 1), func(context.Context) error { return nil })
		g.Admit(tok("r", "b", 3))
	}()
	recv(t, done, "hooks that read the gate (deadlock?)")
	if !slices.Equal(floors, []leasefence.Token{tok("r", "a", 2), tok("r", "a", 2), tok("r", "b", 3)}) || !slices.Equal(logs, []int{0, 1}) {
		t.Errorf("hooks saw floors %v, log sizes %v", floors, logs)
	}
}

func TestGateEscapedCtxIsNotNested(t *testing.T) {
	// Once its write has returned, a write's ctx no longer marks the gate's
	// write: a Commit made with it, or with a context derived from it, is
	// not handled in place (outside the gate's exclusion) but refused with
	// an error matching context.Canceled. A WithCancel or WithoutCancel
	// child does not itself report Canceled afterwards, so only the mark
	// can tell.
	tests := []struct {
		name   string
		derive func(ctx context.Context) context.Context
	}{
		{"the write's ctx", func(ctx context.Context) context.Context { return ctx }},
		{"WithValue", func(ctx context.Context) context.Context { return context.WithValue(ctx, ctxKey{}, 1) }},
		{"WithCancel", func(ctx context.Context) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			_ = cancel // never cancelled: the child reports no error of its own
			return ctx
		}},
		{"WithoutCancel", context.WithoutCancel},
	}
	for _, tt := range tests {
		for _, traced := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/traced=%v", tt.name, traced), func(t *testing.T) {
				var opts []leasefence.GateOption
				var reported []leasefence.CommitInfo
				if traced {
					opts = append(opts, leasefence.WithGateTrace(&leasefence.GateTrace{
						Commit: func(i leasefence.CommitInfo) { reported = append(reported, i) },
					}))
				}
				g := leasefence.NewFenceGate("r", opts...)
				var kept context.Context
				if err := g.Commit(t.Context(), tok("r", "a", 1), func(ctx context.Context) error {
					kept = tt.derive(ctx)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				for _, token := range []leasefence.Token{tok("r", "b", 2), tok("r", "old", 1)} {
					wrote := false
					err := g.Commit(kept, token, func(context.Context) error { wrote = true; return nil })
					if !errors.Is(err, context.Canceled) || wrote {
						t.Errorf("Commit(%v) with an escaped ctx = %v (wrote %v), want context.Canceled and no write", token, err, wrote)
					}
				}
				if g.Floor() != tok("r", "a", 1) {
					t.Errorf("Floor() = %v, want a@1 untouched", g.Floor())
				}
				wantRejections(t, g)
				if len(reported) > 1 {
					t.Errorf("reported %+v: the escaped Commits decided nothing", reported[1:])
				}
				// The gate is free and its next write gets a working ctx.
				err := g.Commit(t.Context(), tok("r", "b", 2), func(ctx context.Context) error {
					if ctx.Value(ctxKey{}) != nil {
						t.Errorf("the next write's ctx carries a value of the escaped one")
					}
					return ctx.Err()
				})
				if err != nil {
					t.Errorf("Commit afterwards = %v", err)
				}
			})
		}
	}
}

// TestGateAdmitRacesCommits: Admits and Commits race, each picking a fence
// just around the current floor so that most of them move it. An Admit that
// has returned must bound every Commit that starts after it, the floor
// never goes down, and admitted writes still never overlap and never go
// down.
func TestGateAdmitRacesCommits(t *testing.T) {
	const committers, admitters, each = 3, 2, 2000
	g := leasefence.NewFenceGate("r")
	ctx := t.Context()
	token := func(f leasefence.Fence) leasefence.Token { return tok("r", fmt.Sprint("h", f), f) } // one holder per fence: no conflicts
	// pushed is the highest fence an Admit has returned nil for.
	var pushed atomic.Uint64
	var written []leasefence.Fence
	var inFlight atomic.Int32
	var committing, pushing sync.WaitGroup
	for w := range committers {
		committing.Go(func() {
			for n := range each {
				f := g.Floor().Fence + leasefence.Fence((w+n)%3) // at, or just above, the floor
				if f == 0 {
					f = 1
				}
				bound := leasefence.Fence(pushed.Load())
				err := g.Commit(ctx, token(f), func(context.Context) error {
					if inFlight.Add(1) != 1 {
						t.Error("two admitted writes ran at once")
					}
					if f < bound {
						t.Errorf("admitted fence %d after an Admit of %d had returned", f, bound)
					}
					written = append(written, f)
					inFlight.Add(-1)
					return nil
				})
				if err != nil && !errors.Is(err, leasefence.ErrStaleFence) {
					t.Error(err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	for w := range admitters {
		pushing.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				f := g.Floor().Fence + leasefence.Fence(1+(w+n)%2)
				if g.Admit(token(f)) != nil {
					continue
				}
				for {
					p := pushed.Load()
					if uint64(f) <= p || pushed.CompareAndSwap(p, uint64(f)) {
						break
					}
				}
			}
		})
	}
	watched := make(chan error, 1)
	go func() {
		var last leasefence.Fence
		for {
			select {
			case <-stop:
				watched <- nil
				return
			default:
			}
			f := g.Floor().Fence
			if f < last {
				watched <- fmt.Errorf("floor went down from %d to %d", last, f)
				return
			}
			last = f
			runtime.Gosched()
		}
	}()
	committing.Wait()
	close(stop)
	pushing.Wait()
	if err := recv(t, watched, "the floor watcher"); err != nil {
		t.Error(err)
	}
	if !slices.IsSorted(written) {
		t.Errorf("admitted fences went down")
	}
	for n, r := range g.Rejections() {
		if r.Seq != uint64(n+1) || r.Fence >= r.FloorFence {
			t.Fatalf("rejection %d = %+v", n, r)
		}
	}
}

// TestGateCancelledWaiterPassesTheWakeUpOn races the cancellation of the
// first waiter against the end of the running write, which wakes it. Either
// way the second waiter must get the gate: a cancelled waiter never
// swallows a wake-up.
func TestGateCancelledWaiterPassesTheWakeUpOn(t *testing.T) {
	for range 200 {
		g := leasefence.NewFenceGate("r")
		h := hold(t, g, tok("r", "a", 1), nil)

		firstCtx, cancelFirst := newWaitSignalCtx(t.Context())
		first := make(chan error, 1)
		go func() {
			first <- g.Commit(firstCtx, tok("r", "a", 1), func(context.Context) error { return nil })
		}()
		recv(t, firstCtx.waiting, "the first waiter to wait")
		secondCtx, cancelSecond := newWaitSignalCtx(t.Context())
		second := make(chan error, 1)
		go func() {
			second <- g.Commit(secondCtx, tok("r", "a", 1), func(context.Context) error { return nil })
		}()
		recv(t, secondCtx.waiting, "the second waiter to wait")

		go cancelFirst()
		if err := h.release(t); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, first, "the first waiter"); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("first waiter = %v, want nil or context.Canceled", err)
		}
		if err := recv(t, second, "the second waiter (a lost wake-up?)"); err != nil {
			t.Fatalf("second waiter = %v", err)
		}
		cancelSecond()
	}
}

// TestGateContendedWithCancellations: many Commits contend, some with
// contexts cancelled at random moments. Every Commit ends, cancelled ones
// without writing, and the gate is free afterwards.
func TestGateContendedWithCancellations(t *testing.T) {
	const goroutines, each = 8, 200
	g := leasefence.NewFenceGate("r")
	var inFlight atomic.Int32
	var writes, cancelled atomic.Int64
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			for n := range each {
				ctx, cancel := context.WithCancel(t.Context())
				if (w+n)%3 == 0 {
					go cancel()
				}
				err := g.Commit(ctx, tok("r", "a", 1), func(context.Context) error {
					if inFlight.Add(1) != 1 {
						t.Error("two admitted writes ran at once")
					}
					writes.Add(1)
					runtime.Gosched()
					inFlight.Add(-1)
					return nil
				})
				cancel()
				switch {
				case err == nil:
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recv(t, done, "the contending Commits (a lost wake-up?)")
	if writes.Load()+cancelled.Load() != goroutines*each {
		t.Errorf("%d writes + %d cancelled != %d Commits", writes.Load(), cancelled.Load(), goroutines*each)
	}
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := g.Commit(ctx, tok("r", "a", 1), func(context.Context) error { return nil }); err != nil {
		t.Errorf("Commit afterwards = %v: the gate was left taken", err)
	}
}

func TestGateCommitAllocations(t *testing.T) {
	// Each write gets a context of its own, carved from a chunk the gate
	// allocates once per 8 (AllocsPerRun's integer average rounds that
	// to 0); judging and raising the floor allocate nothing.
	g := leasefence.NewFenceGate("r")
	ctx := context.Background()
	write := func(context.Context) error { return nil }
	var err error
	if allocs := testing.AllocsPerRun(1000, func() { err = g.Commit(ctx, tok("r", "a", 1), write) }); allocs > 0 || err != nil {
		t.Errorf("Commit under the floor: %v allocations, err %v; want less than one a Commit", allocs, err)
	}
	fence := leasefence.Fence(1)
	if allocs := testing.AllocsPerRun(1000, func() { fence++; err = g.Commit(ctx, tok("r", "a", fence), write) }); allocs > 0 || err != nil {
		t.Errorf("Commit raising the floor: %v allocations, err %v; want less than one a Commit", allocs, err)
	}
	if got := g.Floor(); got.Fence != fence {
		t.Errorf("floor %v after raising it to fence %d", got, fence)
	}
}

// The write contexts come from chunks, each used once: every write has a
// context no other write had, and one kept past its write stays escaped
// (refused, never nested) while the writes carved beside it run, whether
// they raise the floor or not.
func TestGateChunkedWriteContextsStayEscaped(t *testing.T) {
	g := leasefence.NewFenceGate("r")
	var kept []context.Context
	fence := leasefence.Fence(1)
	for i := range 80 { // chunks of both kinds, more than twice over
		if i%3 == 0 {
			fence++ // this Commit raises the floor
		}
		err := g.Commit(t.Context(), tok("r", "a", fence), func(ctx context.Context) error {
			for k, old := range kept {
				if old == ctx {
					t.Fatalf("write %d has the context of write %d", i, k)
				}
				err := g.Commit(old, tok("r", "a", fence), func(context.Context) error {
					t.Errorf("write %d: a Commit with write %d's kept context ran its write", i, k)
					return nil
				})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("write %d: a Commit with write %d's kept context = %v, want an escaped write (context.Canceled)", i, k, err)
				}
			}
			kept = append(kept, ctx)
			return nil
		})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}
