package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/leasefence/lab/leasefence"
)

// The gate benchmarks give the gate and its baseline, a sync.Mutex-guarded
// call, the same trivial write, so the difference is what the fence costs.

// writes is touched only under the gate or the mutex, one write at a time,
// so the contended cases do not race on it.
var writes int

// write is the callback both sides run. It is a package variable, not a
// function name, so the compiler cannot inline it into the baseline: both
// sides make the same indirect call.
var write = func(context.Context) error {
	writes++
	return nil
}

// mutexGuard is the baseline: what a resource without a fence would do to
// keep its writes one at a time. The deferred Unlock keeps it usable after
// a panicking write, as the gate is.
type mutexGuard struct{ mu sync.Mutex }

// Call runs write under the mutex. It is not inlined because Commit is not
// either: both sides pay one call and one indirect call.
//
//go:noinline
func (g *mutexGuard) Call(ctx context.Context, write func(context.Context) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return write(ctx)
}

// modelGuard is the least a gate with per-call write contexts can cost:
// the mutex, and the one allocation of a context of the write's own, the
// size of the gate's and made to escape as the gate's does (the write
// receives it). The gate's cost above it is the fence itself: the checks,
// the floor, and marking the context returned.
type modelGuard struct{ mu sync.Mutex }

type modelCtx struct {
	context.Context
	_ [6]*int // with the embedded Context: the 64 bytes, pointers all, of the gate's write context
}

//go:noinline
func (g *modelGuard) Call(ctx context.Context, write func(context.Context) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return write(&modelCtx{Context: ctx})
}

func token(resource, holder string, f leasefence.Fence) leasefence.Token {
	return leasefence.Token{Resource: resource, Holder: holder, Fence: f}
}

// contention is the number of goroutines committing at once.
var contention = []int{1, 2, 8, 64}

// gateImpls are the sides of the gate benchmarks, the baseline first
// (benchstat -col /impl takes the first column it meets as its base), then
// the model of the gate's least cost, then the gate. Each makes a fresh
// guard and returns a commit on it.
var gateImpls = []struct {
	name   string
	commit func() func(context.Context) error
}{
	{"mutex", func() func(context.Context) error {
		var g mutexGuard
		return func(ctx context.Context) error { return g.Call(ctx, write) }
	}},
	{"model", func() func(context.Context) error {
		var g modelGuard
		return func(ctx context.Context) error { return g.Call(ctx, write) }
	}},
	{"gate", func() func(context.Context) error {
		g := leasefence.NewFenceGate("r")
		t := token("r", "a", 1)
		return func(ctx context.Context) error { return g.Commit(ctx, t, write) }
	}},
}

// benchCommits runs commit with ctx: b.Loop alone (n == 1), otherwise
// b.RunParallel with ceil(n/GOMAXPROCS) goroutines per P.
func benchCommits(b *testing.B, n int, ctx context.Context, commit func(context.Context) error) {
	b.ReportAllocs()
	if n == 1 {
		for b.Loop() {
			if err := commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(perP(n))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := commit(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// perP is how many goroutines per P make n at least: b.RunParallel starts
// a multiple of GOMAXPROCS.
func perP(n int) int { return (n + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0) }

// BenchmarkGateCommit is FenceGate.Commit of the holder of the floor, alone
// and with 2, 8 and 64 goroutines committing to the same gate, beside the
// mutex-guarded call. Uncontended it is a b.Loop; contended it is
// b.RunParallel, the testing package's loop for many goroutines, with
// ceil(n/GOMAXPROCS) goroutines per P (the name says how many ran).
func BenchmarkGateCommit(b *testing.B) {
	for _, n := range contention {
		goroutines := perP(n) * runtime.GOMAXPROCS(0)
		if n == 1 {
			goroutines = 1
		}
		for _, impl := range gateImpls {
			b.Run(fmt.Sprintf("goroutines=%d/impl=%s", goroutines, impl.name), func(b *testing.B) {
				benchCommits(b, n, context.Background(), impl.commit())
			})
		}
	}
}

// BenchmarkGateCommitCopiedStrings is the uncontended Commit with a token
// whose strings share no bytes with the gate's resource or the floor's
// holder, as with a token decoded from the wire.
func BenchmarkGateCommitCopiedStrings(b *testing.B) {
	g := leasefence.NewFenceGate("resource")
	ctx := context.Background()
	if err := g.Commit(ctx, token("resource", "holder", 1), write); err != nil {
		b.Fatal(err)
	}
	t := token(strings.Clone("resource"), strings.Clone("holder"), 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Commit(ctx, t, write); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGateWouldAdmit(b *testing.B) {
	g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(5))
	t := token("r", "a", 5)
	b.ReportAllocs()
	for b.Loop() {
		if !g.WouldAdmit(t) {
			b.Fatal("refused")
		}
	}
}

func BenchmarkGateAdmit(b *testing.B) {
	g := leasefence.NewFenceGate("r")
	t := token("r", "a", 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Admit(t); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateCommitRaising is the uncontended Commit of a new lease every
// time: each Commit raises the floor.
func BenchmarkGateCommitRaising(b *testing.B) {
	g := leasefence.NewFenceGate("r")
	ctx := context.Background()
	f := leasefence.Fence(0)
	b.ReportAllocs()
	for b.Loop() {
		f++
		if err := g.Commit(ctx, token("r", "a", f), write); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateCommitCancellable is BenchmarkGateCommit with 8 goroutines
// whose ctx can end, beside the mutex: a Commit that finds the gate taken
// waits in a helper goroutine that it can give up on, where a Commit whose
// ctx can never end waits in sync.Mutex.Lock.
func BenchmarkGateCommitCancellable(b *testing.B) {
	const n = 8
	for _, impl := range gateImpls {
		b.Run(fmt.Sprintf("goroutines=%d/impl=%s", perP(n)*runtime.GOMAXPROCS(0), impl.name), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			benchCommits(b, n, ctx, impl.commit())
		})
	}
}

// BenchmarkGateCommitNested is a Commit whose write makes one nested Commit
// with its ctx, handled in place.
func BenchmarkGateCommitNested(b *testing.B) {
	g := leasefence.NewFenceGate("r")
	ctx := context.Background()
	t := token("r", "a", 1)
	outer := func(ctx context.Context) error { return g.Commit(ctx, t, write) }
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Commit(ctx, t, outer); err != nil {
			b.Fatal(err)
		}
	}
}
