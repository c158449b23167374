package bench

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// world is one simulator load: the crowd built-in's behaviour and network
// with this many agents and resources, for this long in virtual time.
type world struct {
	agents, resources int
	duration          time.Duration
}

// reference is the load the simulator's target is stated for: 1,000 agents
// on 100 resources over 10 virtual minutes.
var reference = world{agents: 1000, resources: 100, duration: 10 * time.Minute}

// agentSweep grows the agents tenfold at a time with a resource per ten
// agents. The virtual duration shrinks as the agents grow, keeping the
// agent-minutes, and so the events of a run (about 2.3 million) and its
// wall time (a second or two), the same at every size: what changes is
// only the size of the world each event works in.
var agentSweep = []world{
	{agents: 10, resources: 1, duration: 1000 * time.Minute},
	{agents: 100, resources: 10, duration: 100 * time.Minute},
	reference,
	{agents: 10000, resources: 1000, duration: time.Minute},
}

// resourceSweep spreads the reference crowd over 1 to 1,000 resources:
// fewer resources means more contention (denials and retries), more means
// more holders at once.
var resourceSweep = []world{
	{agents: 1000, resources: 1, duration: 10 * time.Minute},
	{agents: 1000, resources: 10, duration: 10 * time.Minute},
	reference,
	{agents: 1000, resources: 1000, duration: 10 * time.Minute},
}

func (w world) scenario() (spec.Scenario, error) {
	sc, ok := spec.Builtin("crowd")
	if !ok {
		return sc, fmt.Errorf("no built-in scenario %q", "crowd")
	}
	sc.Name = "bench"
	sc.Agents, sc.Resources, sc.Duration = w.agents, w.resources, w.duration
	return sc, sc.Validate()
}

// BenchmarkSimulatorAgents is the agents sweep, BenchmarkSimulatorResources
// the resources sweep; run them with -cpu 1 for the one-core figures.
func BenchmarkSimulatorAgents(b *testing.B)    { simulate(b, agentSweep) }
func BenchmarkSimulatorResources(b *testing.B) { simulate(b, resourceSweep) }

// BenchmarkSimulatorCeiling is the reference load on the simulator in
// fenced mode (impl=sim) and on the bare event loop of the same crowd
// (impl=bare, bareCrowd), the ceiling of its speed; impl=turns runs one of
// each by turns and reports the simulator's rate over the bare loop's
// (sim/bare), the median of its turns. The turns are the figure to read:
// both sides of a turn see the machine within a few seconds of each other,
// where the two sub-benchmarks alone are seconds apart and a shared
// machine's speed moves by a third between them.
//
//	benchstat -filter .name:SimulatorCeiling -col /impl new.txt
func BenchmarkSimulatorCeiling(b *testing.B) {
	sc, err := reference.scenario()
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("agents=%d/resources=%d", reference.agents, reference.resources)
	b.Run(name+"/impl=bare", func(b *testing.B) { measureRuns(b, sc, bareRuns(&sc)) })
	b.Run(name+"/impl=sim", func(b *testing.B) { measureRuns(b, sc, simRuns(b, sc)) })
	b.Run(name+"/impl=turns", func(b *testing.B) { measureTurns(b, bareRuns(&sc), simRuns(b, sc)) })
}

// simulate runs each world in fenced mode, to its end, with no subscriber
// (simRuns).
func simulate(b *testing.B, worlds []world) {
	for _, w := range worlds {
		b.Run(fmt.Sprintf("agents=%d/resources=%d", w.agents, w.resources), func(b *testing.B) {
			sc, err := w.scenario()
			if err != nil {
				b.Fatal(err)
			}
			measureRuns(b, sc, simRuns(b, sc))
		})
	}
}

// runs builds one run of a load (not timed): run steps it to its end,
// finish ends it with its final check, events counts what it made.
type runs func() (run, finish func(), events func() uint64)

// simRuns builds fenced runs of sc on the simulator, each to its end and
// its report, with no subscriber.
func simRuns(b *testing.B, sc spec.Scenario) runs {
	return func() (func(), func(), func() uint64) {
		sim, err := harness.NewSim(sc, history.Fenced)
		if err != nil {
			b.Fatal(err)
		}
		return func() {
				for sim.Step() {
				}
			}, func() {
				if sim.Report() == nil {
					b.Fatal("no report")
				}
			}, sim.Events
	}
}

// bareRuns builds runs of sc's crowd on the bare event loop.
func bareRuns(sc *spec.Scenario) runs {
	return func() (func(), func(), func() uint64) {
		c := newBareCrowd(sc)
		return c.run, func() {}, func() uint64 { return c.events }
	}
}

// timed is one run's events, the heap allocations of its stepping, and
// the wall time of its stepping and final check.
type timed struct {
	events, stepAllocs uint64
	wall               time.Duration
}

// timeRun builds a run and times it. It collects the garbage first, so
// that no run pays for the one before it (a simulator run leaves about
// 70 MB), whichever side of a turn that was.
func timeRun(build runs) timed {
	var before, after runtime.MemStats
	run, finish, count := build()
	runtime.GC()
	start := time.Now()
	runtime.ReadMemStats(&before)
	run()
	runtime.ReadMemStats(&after)
	finish()
	return timed{events: count(), stepAllocs: after.Mallocs - before.Mallocs, wall: time.Since(start)}
}

func (t timed) rate() float64 { return float64(t.events) / t.wall.Seconds() }

// measureTurns runs a bare run and a simulator run by turns, and reports
// the simulator's rate over the bare loop's (sim/bare), the median of the
// turns, and each side's median rate.
func measureTurns(b *testing.B, bare, sim runs) {
	var ratios, bareRates, simRates []float64
	for b.Loop() {
		x, y := timeRun(bare).rate(), timeRun(sim).rate()
		ratios, bareRates, simRates = append(ratios, y/x), append(bareRates, x), append(simRates, y)
	}
	b.ReportMetric(median(ratios), "sim/bare")
	b.ReportMetric(median(bareRates), "bare-events/s")
	b.ReportMetric(median(simRates), "sim-events/s")
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// measureRuns measures runs of sc, each built by build (not timed), run
// by the run it returns and ended by its finish (the final check), and
// reports:
//
//   - events/s: events per wall second of stepping and checking (building
//     the world is in ns/op but not here);
//   - virtual-s/s: virtual seconds per wall second, the time compression;
//   - allocs/event: heap allocations per event while stepping (the steady
//     state: neither building the world nor the final check);
//   - events/op: the size of a run, to read the other figures by.
func measureRuns(b *testing.B, sc spec.Scenario, build runs) {
	b.ReportAllocs()
	var sum timed
	for b.Loop() {
		t := timeRun(build)
		sum.events += t.events
		sum.stepAllocs += t.stepAllocs
		sum.wall += t.wall
	}
	b.ReportMetric(sum.rate(), "events/s")
	b.ReportMetric(harness.Compression(sc.Duration*time.Duration(b.N), sum.wall), "virtual-s/s")
	b.ReportMetric(float64(sum.stepAllocs)/float64(sum.events), "allocs/event")
	b.ReportMetric(float64(sum.events)/float64(b.N), "events/op")
}

// TestWorlds checks the sweeps: every world is a valid scenario, the agents
// sweep keeps a resource per ten agents, and both sweeps pass through the
// reference load, so their lines meet at the figure the target is about.
func TestWorlds(t *testing.T) {
	for _, sweep := range []struct {
		name   string
		worlds []world
	}{{"agents", agentSweep}, {"resources", resourceSweep}} {
		if !slices.Contains(sweep.worlds, reference) {
			t.Errorf("the %s sweep misses the reference load %+v", sweep.name, reference)
		}
		for _, w := range sweep.worlds {
			if _, err := w.scenario(); err != nil {
				t.Errorf("%s sweep, %+v: %v", sweep.name, w, err)
			}
		}
	}
	for _, w := range agentSweep {
		if w.resources*10 != w.agents {
			t.Errorf("agents sweep, %+v: want agents/10 resources", w)
		}
	}
	if reference != (world{agents: 1000, resources: 100, duration: 10 * time.Minute}) {
		t.Errorf("the reference load is %+v, want 1,000 agents on 100 resources over 10 virtual minutes", reference)
	}
}
