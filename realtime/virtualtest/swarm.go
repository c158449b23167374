package virtualtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// SwarmConfig configures Swarm. Its zero value runs no seed.
type SwarmConfig struct {
	// Seeds is how many seeds to run, from FirstSeed on.
	Seeds     int
	FirstSeed uint64
	// Jobs is how many bubbles run at once (GOMAXPROCS for 0).
	Jobs int
	// Ranges are what each seed's fault knobs are drawn from
	// (harness.DefaultSwarmRanges for nil). The knobs the target cannot
	// play (SwarmFixed) are fixed on top of them.
	Ranges *harness.SwarmRanges
	// Run configures each seed's run.
	Run Config
}

// SwarmFirst is a mode's first counterexample in a swarm: the lowest seed
// on which it showed one (harness.ShowsCounterexample: an invariant it
// promises broken, or a stale write landed), with how many seeds and how
// much wall time the swarm had spent when that seed's run was done.
type SwarmFirst struct {
	Seed     uint64
	SeedsRun int
	Wall     time.Duration
	Digest   string
	// Violations and StaleWrites are what the seed's run showed.
	Violations  []string
	StaleWrites int
}

// SwarmRunError is a seed whose run did not end as runs do: a call that
// never returned, a bubble that stopped its clock, a run that could not
// start.
type SwarmRunError struct {
	Seed uint64
	Err  error
}

// SwarmResult is what a swarm over one target gives.
type SwarmResult struct {
	Target   string
	Scenario string // the base scenario's name
	// FirstSeed and Seeds are the seeds run: FirstSeed to
	// FirstSeed+Seeds-1.
	FirstSeed uint64
	Seeds     int
	// Fixed are the knobs every seed kept as the base scenario has them.
	Fixed []harness.SwarmKnob
	// Elapsed is the swarm's wall time.
	Elapsed time.Duration
	// First has an entry for every mode the runs had: its first
	// counterexample, or nil if no seed showed one.
	First map[history.Mode]*SwarmFirst
	// FirstViolation is each mode's first seed that broke an invariant
	// the mode promises (a violation, its stale writes aside: for a naive
	// discipline, a bug of the lock's own), or nil.
	FirstViolation map[history.Mode]*SwarmFirst
	// Errors are the seeds whose runs failed, in seed order.
	Errors []SwarmRunError
	// Digests are each seed's history digest, by seed ("" for a run
	// that failed).
	Digests map[uint64]string
}

// SeedsPerSecond is how many seeds the swarm ran a wall second, over all
// its jobs.
func (r *SwarmResult) SeedsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Seeds) / r.Elapsed.Seconds()
}

// Modes are the modes the swarm's runs had, sorted.
func (r *SwarmResult) Modes() []history.Mode { return slices.Sorted(maps.Keys(r.First)) }

// SwarmFixed are the knobs a swarm over target keeps as base has them,
// because the target refuses a scenario that has them: its restarts (a
// library lock's server, or a Redis the lab did not start) and the gate
// push (a library lock has no fence to push).
func SwarmFixed(base spec.Scenario, target Target) []harness.SwarmKnob {
	if target.Plays == nil {
		return nil
	}
	var fixed []harness.SwarmKnob
	restart := base
	restart.Restarts = []spec.Restart{{At: base.Duration / 2}}
	if target.Plays(restart) != nil {
		fixed = append(fixed, harness.SwarmRestarts)
	}
	push := base
	push.Push.Enabled = true
	if target.Plays(push) != nil {
		fixed = append(fixed, harness.SwarmPush, harness.SwarmPushDelay)
	}
	return fixed
}

// Swarm runs base on target over cfg.Seeds seeds, each with the fault mix
// harness.SwarmScenario draws for it (the same draw as lab swarm's), each
// seed in a bubble of its own, cfg.Jobs at a time. It fails t only if a
// bubble itself fails; a run that fails is one of the result's Errors.
func Swarm(t *testing.T, base spec.Scenario, target Target, cfg SwarmConfig) *SwarmResult {
	t.Helper()
	ranges := harness.DefaultSwarmRanges
	if cfg.Ranges != nil {
		ranges = *cfg.Ranges
	}
	fixed := SwarmFixed(base, target)
	ranges.Fixed = slices.Concat(ranges.Fixed, fixed)
	out := &SwarmResult{Target: target.Name, Scenario: base.Name, FirstSeed: cfg.FirstSeed, Seeds: cfg.Seeds, Fixed: fixed,
		First: map[history.Mode]*SwarmFirst{}, FirstViolation: map[history.Mode]*SwarmFirst{}, Digests: map[uint64]string{}}
	outcomes := make([]*Outcome, cfg.Seeds)
	walls := make([]time.Duration, cfg.Seeds)
	start := time.Now()
	harness.Parallel(context.Background(), cfg.Seeds, cfg.Jobs, func(i int) error {
		outcomes[i] = Run(t, harness.SwarmScenario(base, ranges, cfg.FirstSeed+uint64(i)), target, cfg.Run)
		walls[i] = time.Since(start)
		return nil
	}, nil)
	out.Elapsed = time.Since(start)
	for i, o := range outcomes {
		out.add(cfg.FirstSeed+uint64(i), i+1, walls[i], o)
	}
	return out
}

// add folds seed's outcome, the seedsRun-th seed, done wall after the
// swarm's start, into r.
func (r *SwarmResult) add(seed uint64, seedsRun int, wall time.Duration, o *Outcome) {
	if o.Err != nil {
		r.Errors = append(r.Errors, SwarmRunError{Seed: seed, Err: o.Err})
		r.Digests[seed] = ""
		return
	}
	r.Digests[seed] = o.Digest()
	this := func(rep *history.Report) *SwarmFirst {
		return &SwarmFirst{Seed: seed, SeedsRun: seedsRun, Wall: wall, Digest: r.Digests[seed], Violations: rep.Violations, StaleWrites: rep.StaleWritesLanded}
	}
	for m, rep := range o.Result.Modes {
		if _, seen := r.First[m]; !seen {
			r.First[m], r.FirstViolation[m] = nil, nil
		}
		if r.First[m] == nil && harness.ShowsCounterexample(rep) {
			r.First[m] = this(rep)
		}
		if r.FirstViolation[m] == nil && len(rep.Violations) > 0 {
			r.FirstViolation[m] = this(rep)
		}
	}
}

// String says the swarm's result in a few lines: its rate, and each
// mode's first counterexample.
func (r *SwarmResult) String() string {
	s := fmt.Sprintf("swarm %s on %s: seeds %d-%d, %d in %v, %.1f seeds/s", r.Scenario, r.Target, r.FirstSeed, r.FirstSeed+uint64(max(r.Seeds, 1)-1),
		r.Seeds, r.Elapsed.Round(time.Millisecond), r.SeedsPerSecond())
	if len(r.Fixed) > 0 {
		s += fmt.Sprintf(" (fixed: %v)", r.Fixed)
	}
	for _, m := range r.Modes() {
		f := r.First[m]
		if f == nil {
			s += fmt.Sprintf("\n  %-10s no counterexample in %d seeds", m, r.Seeds)
			continue
		}
		what := history.Plural(f.StaleWrites, "stale write", "stale writes")
		if len(f.Violations) > 0 {
			what = fmt.Sprintf("%q", f.Violations)
		}
		s += fmt.Sprintf("\n  %-10s first counterexample: seed %d, after %d seeds and %v (digest %s): %s", m, f.Seed, f.SeedsRun,
			f.Wall.Round(time.Millisecond), f.Digest, what)
		if v := r.FirstViolation[m]; v == nil {
			s += fmt.Sprintf("\n  %-10s no violation in %d seeds", "", r.Seeds)
		} else if v.Seed != f.Seed {
			s += fmt.Sprintf("\n  %-10s first violation: seed %d, after %d seeds and %v (digest %s): %q", "", v.Seed, v.SeedsRun,
				v.Wall.Round(time.Millisecond), v.Digest, v.Violations)
		}
	}
	for _, e := range r.Errors {
		s += fmt.Sprintf("\n  seed %d failed: %v", e.Seed, e.Err)
	}
	return s
}
