package leasefence_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// The gate benchmarks run the same trivial write as their baseline, a call
// guarded by a sync.Mutex, so the difference is what the fence costs.

var benchSink int

func benchWrite(context.Context) error {
	benchSink++
	return nil
}

func BenchmarkFenceGateCommit(b *testing.B) {
	g := leasefence.NewFenceGate("r")
	ctx := context.Background()
	t := tok("r", "a", 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Commit(ctx, t, benchWrite); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFenceGateCommitCopiedStrings is BenchmarkFenceGateCommit with a
// token whose strings share no bytes with the gate's resource or the
// floor's holder, as with a token decoded from the wire.
func BenchmarkFenceGateCommitCopiedStrings(b *testing.B) {
	g := leasefence.NewFenceGate("resource")
	ctx := context.Background()
	if err := g.Commit(ctx, tok("resource", "holder", 1), benchWrite); err != nil {
		b.Fatal(err)
	}
	t := tok(strings.Clone("resource"), strings.Clone("holder"), 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Commit(ctx, t, benchWrite); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMutexGuardedCall(b *testing.B) {
	var mu sync.Mutex
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		mu.Lock()
		err := benchWrite(ctx)
		mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// contended splits b.N calls of call over exactly n goroutines.
func contended(b *testing.B, n int, call func() error) {
	b.ReportAllocs()
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range n {
		calls := b.N / n
		if w < b.N%n {
			calls++
		}
		wg.Go(func() {
			for range calls {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

var contention = []int{2, 8, 64}

func BenchmarkFenceGateCommitContended(b *testing.B) {
	for _, n := range contention {
		b.Run(fmt.Sprint("goroutines=", n), func(b *testing.B) {
			g := leasefence.NewFenceGate("r")
			ctx := context.Background()
			t := tok("r", "a", 1)
			contended(b, n, func() error { return g.Commit(ctx, t, benchWrite) })
		})
	}
}

func BenchmarkMutexGuardedCallContended(b *testing.B) {
	for _, n := range contention {
		b.Run(fmt.Sprint("goroutines=", n), func(b *testing.B) {
			var mu sync.Mutex
			ctx := context.Background()
			contended(b, n, func() error {
				mu.Lock()
				defer mu.Unlock()
				return benchWrite(ctx)
			})
		})
	}
}

func BenchmarkFenceGateWouldAdmit(b *testing.B) {
	g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(5))
	t := tok("r", "a", 5)
	b.ReportAllocs()
	for b.Loop() {
		if !g.WouldAdmit(t) {
			b.Fatal("refused")
		}
	}
}

func BenchmarkFenceGateAdmit(b *testing.B) {
	g := leasefence.NewFenceGate("r")
	t := tok("r", "a", 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Admit(t); err != nil {
			b.Fatal(err)
		}
	}
}

// requestPool is pre-generated so that building ids is not measured. It is
// larger than the replay cache, so a reused id has always been evicted and
// is a fresh acquire again.
func requestPool(n int, holder, resource string) []leasefence.AcquireRequest {
	reqs := make([]leasefence.AcquireRequest, n)
	for i := range reqs {
		reqs[i] = leasefence.AcquireRequest{RequestID: fmt.Sprintf("req-%08d", i), Holder: holder, Resource: resource}
	}
	return reqs
}

// BenchmarkCoordinatorAcquire measures Acquire alone: the coordinator's
// clock moves one TTL on every read, so each lease has expired by the next
// call and every Acquire is a fresh grant that mints a fence.
func BenchmarkCoordinatorAcquire(b *testing.B) {
	clock := leasefence.NewManualClock("coordinator", leasefence.WithStepPerRead(time.Second))
	c := newCoordinator(b, clock, time.Second)
	reqs := requestPool(1<<14, "a", "r")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		out, err := c.Acquire(reqs[i%len(reqs)])
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		i++
	}
}

// BenchmarkCoordinatorAcquireRelease cycles acquire and release on one
// resource.
func BenchmarkCoordinatorAcquireRelease(b *testing.B) {
	c := newCoordinator(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
	reqs := requestPool(1<<14, "a", "r")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		out, err := c.Acquire(reqs[i%len(reqs)])
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		if rel, err := c.Release(out.Grant.Token); err != nil || !rel.OK {
			b.Fatal(rel, err)
		}
		i++
	}
}

// BenchmarkCoordinatorAcquireHeld measures the refusal path: the resource
// is held by someone else.
func BenchmarkCoordinatorAcquireHeld(b *testing.B) {
	c := newCoordinator(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
	if out, _ := c.Acquire(leasefence.AcquireRequest{RequestID: "held", Holder: "z", Resource: "r"}); !out.OK {
		b.Fatal(out)
	}
	reqs := requestPool(1<<14, "a", "r")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		out, err := c.Acquire(reqs[i%len(reqs)])
		if err != nil || out.Reason != leasefence.ReasonHeld {
			b.Fatal(out, err)
		}
		i++
	}
}

func BenchmarkCoordinatorRenew(b *testing.B) {
	c := newCoordinator(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
	out, _ := c.Acquire(leasefence.AcquireRequest{RequestID: "acq", Holder: "a", Resource: "r"})
	if !out.OK {
		b.Fatal(out)
	}
	req := leasefence.RenewRequest{RequestID: "renew", Token: out.Grant.Token}
	b.ReportAllocs()
	for b.Loop() {
		rout, err := c.Renew(req)
		if err != nil || !rout.OK {
			b.Fatal(rout, err)
		}
	}
}

// BenchmarkCoordinatorRelease releases leases acquired, untimed, in
// batches over many resources.
func BenchmarkCoordinatorRelease(b *testing.B) {
	const batch = 4096
	c := newCoordinator(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
	reqs := make([]leasefence.AcquireRequest, batch)
	for i := range reqs {
		reqs[i] = leasefence.AcquireRequest{Holder: "a", Resource: fmt.Sprint("r", i)}
	}
	tokens := make([]leasefence.Token, batch)
	round := 0
	refill := func() {
		for i := range reqs {
			reqs[i].RequestID = fmt.Sprint(round, "-", i)
			out, err := c.Acquire(reqs[i])
			if err != nil || !out.OK {
				b.Fatal(out, err)
			}
			tokens[i] = out.Grant.Token
		}
		round++
	}
	refill()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			refill()
			i = 0
			b.StartTimer()
		}
		if rel, err := c.Release(tokens[i]); err != nil || !rel.OK {
			b.Fatal(rel, err)
		}
		i++
	}
}

// BenchmarkMapMutexAcquire is the baseline for Acquire: a map of holders
// behind a mutex, with an expiry and a fence counter, and nothing else.
func BenchmarkMapMutexAcquire(b *testing.B) {
	type entry struct {
		holder string
		fence  uint64
		expiry time.Duration
	}
	var (
		mu    sync.Mutex
		m     = map[string]entry{}
		fence uint64
		now   time.Duration
	)
	acquire := func(holder, resource string) (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		now += time.Second // as the stepping clock above: every lease has expired
		if e, ok := m[resource]; ok && now < e.expiry {
			return 0, false
		}
		fence++
		m[resource] = entry{holder: holder, fence: fence, expiry: now + time.Second}
		return fence, true
	}
	reqs := requestPool(1<<14, "a", "r")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := reqs[i%len(reqs)]
		if _, ok := acquire(r.Holder, r.Resource); !ok {
			b.Fatal("held")
		}
		i++
	}
}

// BenchmarkClientRoundTrip is a whole acquire: begin (random id, clock
// reading, record), the coordinator's Acquire, and complete.
func BenchmarkClientRoundTrip(b *testing.B) {
	coord := newCoordinator(b, leasefence.NewManualClock("coordinator", leasefence.WithStepPerRead(time.Second)), time.Second)
	client := newClient(b, leasefence.NewMonotonicClock("agent"), "agent", 0)
	b.ReportAllocs()
	for b.Loop() {
		req, err := client.BeginAcquire("r")
		if err != nil {
			b.Fatal(err)
		}
		out, err := coord.Acquire(req)
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		if _, err := client.CompleteAcquire(req, out.Grant); err != nil {
			b.Fatal(err)
		}
	}
}
