package bench

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// leaseTable is what the coordinator benchmarks call: the Coordinator, or
// its baseline, a map behind a mutex. Both are called through it, so both
// pay the same interface call.
type leaseTable interface {
	Acquire(leasefence.AcquireRequest) (leasefence.Token, bool, error)
	Renew(leasefence.RenewRequest) (bool, error)
	Release(leasefence.Token) (bool, error)
}

// coordinatorTable is the Coordinator as a leaseTable.
type coordinatorTable struct{ c *leasefence.Coordinator }

func (t coordinatorTable) Acquire(req leasefence.AcquireRequest) (leasefence.Token, bool, error) {
	out, err := t.c.Acquire(req)
	return out.Grant.Token, out.OK, err
}

func (t coordinatorTable) Renew(req leasefence.RenewRequest) (bool, error) {
	out, err := t.c.Renew(req)
	return out.OK, err
}

func (t coordinatorTable) Release(tok leasefence.Token) (bool, error) {
	out, err := t.c.Release(tok)
	return out.OK, err
}

// mapTable is the baseline: a lease per resource in a map behind a mutex,
// with an expiry read from the same kind of clock and a fence counter, and
// nothing else (no request ids, no replay, no reasons).
type mapTable struct {
	mu     sync.Mutex
	clock  leasefence.Clock
	ttl    time.Duration
	fence  leasefence.Fence
	leases map[string]mapLease
}

type mapLease struct {
	holder string
	fence  leasefence.Fence
	expiry leasefence.Instant
}

func newMapTable(clock leasefence.Clock, ttl time.Duration) *mapTable {
	return &mapTable{clock: clock, ttl: ttl, leases: map[string]mapLease{}}
}

// live reports whether l is held at now.
func live(l mapLease, now leasefence.Instant) (bool, error) {
	return now.Before(l.expiry)
}

func (m *mapTable) Acquire(req leasefence.AcquireRequest) (leasefence.Token, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, err := m.clock.Now()
	if err != nil {
		return leasefence.Token{}, false, err
	}
	if l, ok := m.leases[req.Resource]; ok {
		if held, err := live(l, now); err != nil || held {
			return leasefence.Token{}, false, err
		}
	}
	m.fence++
	m.leases[req.Resource] = mapLease{holder: req.Holder, fence: m.fence, expiry: now.Add(m.ttl)}
	return leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: m.fence}, true, nil
}

func (m *mapTable) Renew(req leasefence.RenewRequest) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, err := m.clock.Now()
	if err != nil {
		return false, err
	}
	t := req.Token
	l, ok := m.leases[t.Resource]
	if !ok || l.holder != t.Holder || l.fence != t.Fence {
		return false, nil
	}
	if held, err := live(l, now); err != nil || !held {
		return false, err
	}
	l.expiry = now.Add(m.ttl)
	m.leases[t.Resource] = l
	return true, nil
}

func (m *mapTable) Release(t leasefence.Token) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, err := m.clock.Now()
	if err != nil {
		return false, err
	}
	l, ok := m.leases[t.Resource]
	if !ok || l.holder != t.Holder || l.fence != t.Fence {
		return false, nil
	}
	if held, err := live(l, now); err != nil || !held {
		return false, err
	}
	delete(m.leases, t.Resource)
	return true, nil
}

// tables builds each implementation on its own clock, the baseline first:
// benchstat -col /impl takes the first column it meets as its base.
var tables = []struct {
	name string
	make func(b *testing.B, clock leasefence.Clock, ttl time.Duration) leaseTable
}{
	{"map", func(_ *testing.B, clock leasefence.Clock, ttl time.Duration) leaseTable {
		return newMapTable(clock, ttl)
	}},
	{"coordinator", func(b *testing.B, clock leasefence.Clock, ttl time.Duration) leaseTable {
		c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
		if err != nil {
			b.Fatal(err)
		}
		return coordinatorTable{c}
	}},
}

// requestPool is built before the timer starts, so that making ids is not
// measured. It is larger than the coordinator's replay cache (1024 by
// default), so a reused id has been evicted and is a fresh acquire again.
func requestPool(n int, holder, resource string) []leasefence.AcquireRequest {
	reqs := make([]leasefence.AcquireRequest, n)
	for i := range reqs {
		reqs[i] = leasefence.AcquireRequest{RequestID: fmt.Sprintf("req-%08d", i), Holder: holder, Resource: resource}
	}
	return reqs
}

// steppingClock moves one TTL on every read: each lease has expired by the
// next call, so every Acquire is a fresh grant that mints a fence.
func steppingClock() leasefence.Clock {
	return leasefence.NewManualClock("coordinator", leasefence.WithStepPerRead(time.Second))
}

// BenchmarkCoordinator is each operation of the Coordinator beside the same
// operation on a map behind a mutex:
//
//   - acquire: a fresh grant every time (the previous lease has expired);
//   - acquire-held: the refusal, the resource being held by someone else;
//   - acquire-release: a grant then its release, on one resource;
//   - renew: an extension of the live lease;
//   - release: of leases acquired, untimed, in batches over many resources.
func BenchmarkCoordinator(b *testing.B) {
	for _, impl := range tables {
		b.Run("op=acquire/impl="+impl.name, func(b *testing.B) {
			lt := impl.make(b, steppingClock(), time.Second)
			reqs := requestPool(1<<14, "a", "r")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok, err := lt.Acquire(reqs[i%len(reqs)]); err != nil || !ok {
					b.Fatal("not granted:", err)
				}
				i++
			}
		})
	}
	for _, impl := range tables {
		b.Run("op=acquire-held/impl="+impl.name, func(b *testing.B) {
			lt := impl.make(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
			if _, ok, err := lt.Acquire(leasefence.AcquireRequest{RequestID: "held", Holder: "z", Resource: "r"}); err != nil || !ok {
				b.Fatal("not granted:", err)
			}
			reqs := requestPool(1<<14, "a", "r")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok, err := lt.Acquire(reqs[i%len(reqs)]); err != nil || ok {
					b.Fatal("granted while held:", err)
				}
				i++
			}
		})
	}
	for _, impl := range tables {
		b.Run("op=acquire-release/impl="+impl.name, func(b *testing.B) {
			lt := impl.make(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
			reqs := requestPool(1<<14, "a", "r")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t, ok, err := lt.Acquire(reqs[i%len(reqs)])
				if err != nil || !ok {
					b.Fatal("not granted:", err)
				}
				if ok, err := lt.Release(t); err != nil || !ok {
					b.Fatal("not released:", err)
				}
				i++
			}
		})
	}
	for _, impl := range tables {
		b.Run("op=renew/impl="+impl.name, func(b *testing.B) {
			lt := impl.make(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
			t, ok, err := lt.Acquire(leasefence.AcquireRequest{RequestID: "acquire", Holder: "a", Resource: "r"})
			if err != nil || !ok {
				b.Fatal("not granted:", err)
			}
			req := leasefence.RenewRequest{RequestID: "renew", Token: t}
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := lt.Renew(req); err != nil || !ok {
					b.Fatal("not renewed:", err)
				}
			}
		})
	}
	for _, impl := range tables {
		b.Run("op=release/impl="+impl.name, func(b *testing.B) {
			const batch = 4096
			lt := impl.make(b, leasefence.NewMonotonicClock("coordinator"), time.Hour)
			reqs := make([]leasefence.AcquireRequest, batch)
			for i := range reqs {
				reqs[i] = leasefence.AcquireRequest{Holder: "a", Resource: fmt.Sprint("r", i)}
			}
			tokens := make([]leasefence.Token, batch)
			round := 0
			refill := func() {
				for i := range reqs {
					reqs[i].RequestID = fmt.Sprint(round, "-", i)
					t, ok, err := lt.Acquire(reqs[i])
					if err != nil || !ok {
						b.Fatal("not granted:", err)
					}
					tokens[i] = t
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
				if ok, err := lt.Release(tokens[i]); err != nil || !ok {
					b.Fatal("not released:", err)
				}
				i++
			}
		})
	}
}

// BenchmarkAcquireRoundTrip is a whole acquisition as a client makes it:
// BeginAcquire (a random request id, a clock reading, a record), the
// coordinator's Acquire, and CompleteAcquire. Its baseline is the
// coordinator's Acquire alone with requests made beforehand, so the
// difference is what the client adds.
func BenchmarkAcquireRoundTrip(b *testing.B) {
	newCoordinator := func(b *testing.B) *leasefence.Coordinator {
		c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: steppingClock(), TTL: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	// The baseline first, for benchstat -col /impl.
	b.Run("impl=coordinator", func(b *testing.B) {
		coord := newCoordinator(b)
		reqs := requestPool(1<<14, "agent", "r")
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			out, err := coord.Acquire(reqs[i%len(reqs)])
			if err != nil || !out.OK {
				b.Fatal(out, err)
			}
			i++
		}
	})
	b.Run("impl=client", func(b *testing.B) {
		coord := newCoordinator(b)
		client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent"), Holder: "agent"})
		if err != nil {
			b.Fatal(err)
		}
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
	})
}
