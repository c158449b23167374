//go:build unix

package bench

import (
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/redisbackend"
	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// asTest runs f as a test of its own and waits for it: testing/synctest
// makes a bubble only for a *testing.T, which a benchmark has not.
// testing.RunTests runs it once for each -cpu value and -count, at that
// GOMAXPROCS; the first run alone calls f, at the benchmark's GOMAXPROCS,
// and the others skip. A failed f fails b, and so does one never run.
func asTest(b *testing.B, f func(t *testing.T)) {
	b.Helper()
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	var ran atomic.Bool
	all := func(string, string) (bool, error) { return true, nil }
	ok := testing.RunTests(all, []testing.InternalTest{{Name: b.Name(), F: func(t *testing.T) {
		if ran.Swap(true) {
			t.SkipNow()
		}
		runtime.GOMAXPROCS(procs)
		f(t)
	}}})
	if !ran.Load() {
		b.Fatal("the run in a bubble never ran (a -test.skip pattern skips it)")
	}
	if !ok {
		b.Fatal("the run in a bubble failed")
	}
}

// virtualBench is the scenario the virtual and real-Redis runs share:
// overlap for 5 s, so that the real run costs 5 s an op.
func virtualBench(b *testing.B) spec.Scenario {
	sc, ok := spec.Builtin("overlap")
	if !ok {
		b.Fatal("no built-in overlap")
	}
	sc.Duration = 5 * time.Second
	return sc
}

// BenchmarkVirtualTime runs the same scenario on each Redis contender in
// virtual time (miniredis in memory, run=virtual) and in real time on the
// Redis of scripts/redis.sh (run=real-redis, skipped without
// LEASEFENCE_REDIS_URL), and reports x-real-time, the scenario's duration
// over the op's wall time (virtual runs: x-real-time-cpu too, over the
// op's CPU time, which other work on the machine does not stretch). redis
// is the lab's naive and fenced modes side by side.
func BenchmarkVirtualTime(b *testing.B) {
	sc := virtualBench(b)
	for _, tc := range []struct {
		name   string
		target virtualtest.Target
		modes  []history.Mode
	}{
		{"redis", virtualtest.Redis(), []history.Mode{history.Naive, history.Fenced}},
		{registry.Redsync, virtualtest.Contender(registry.Redsync), []history.Mode{registry.Redsync}},
		{registry.Redislock, virtualtest.Contender(registry.Redislock), []history.Mode{registry.Redislock}},
	} {
		b.Run("contender="+tc.name+"/run=virtual", func(b *testing.B) {
			cpu := cpuTime(b)
			for b.Loop() {
				asTest(b, func(t *testing.T) {
					if o := virtualtest.Run(t, sc, tc.target, virtualtest.Config{}); o.Err != nil {
						t.Fatal(o.Err)
					}
				})
			}
			reportCompression(b, sc)
			// The same over the CPU time the process spent an op: what the
			// wall time would be on a machine the run had to itself.
			b.ReportMetric(float64(sc.Duration)*float64(b.N)/float64(cpuTime(b)-cpu), "x-real-time-cpu")
		})
		b.Run("contender="+tc.name+"/run=real-redis", func(b *testing.B) {
			url := os.Getenv("LEASEFENCE_REDIS_URL")
			if url == "" {
				b.Skip("LEASEFENCE_REDIS_URL is not set (scripts/redis.sh start; eval \"$(scripts/redis.sh env)\")")
			}
			for b.Loop() {
				if _, err := realtime.RunScenario(b.Context(), realtime.Config{Backend: registry.Redis, TempDir: b.TempDir(), Settings: redisbackend.Settings{URL: url}.Entry()}, sc,
					realtime.RunOptions{Modes: tc.modes}); err != nil {
					b.Fatal(err)
				}
			}
			reportCompression(b, sc)
		})
	}
}

// reportCompression reports how many times faster than real time an op
// ran sc.
func reportCompression(b *testing.B, sc spec.Scenario) {
	if op := b.Elapsed() / time.Duration(b.N); op > 0 {
		b.ReportMetric(float64(sc.Duration)/float64(op), "x-real-time")
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVirtualSwarm runs a swarm of 20 seeds of overlap, 3 s each
// with its fault mix drawn per seed (as go test ./realtime/virtualtest/
// -run TestSwarm runs it), GOMAXPROCS bubbles at once, and reports
// seeds/s, and cpu-ms/seed, the CPU time the process spent a seed: on a
// machine shared with other work, GOMAXPROCS seconds of CPU a second over
// it is the rate the swarm would have had alone.
func BenchmarkVirtualSwarm(b *testing.B) {
	base, _ := spec.Builtin("overlap")
	base.Duration = 3 * time.Second
	const seeds = 20
	for _, name := range []string{registry.Redsync, registry.Redislock, registry.Redlock} {
		b.Run("contender="+name, func(b *testing.B) {
			cpu := cpuTime(b)
			for b.Loop() {
				asTest(b, func(t *testing.T) {
					r := virtualtest.Swarm(t, base, virtualtest.Contender(name), virtualtest.SwarmConfig{Seeds: seeds, FirstSeed: 1})
					for _, e := range r.Errors {
						t.Errorf("seed %d: %v", e.Seed, e.Err)
					}
				})
			}
			b.ReportMetric(float64(seeds*b.N)/b.Elapsed().Seconds(), "seeds/s")
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/float64(seeds*b.N), "cpu-ms/seed")
		})
	}
}
