package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// RunOptions configures Fixture.Run.
type RunOptions struct {
	// Jobs is how many seeds run at once; 0 means GOMAXPROCS.
	Jobs int
	// Progress, if set, is called after each seed with the count done. It
	// is called from the goroutines running the seeds.
	Progress func(done, total int)
	// Runner runs a fixture whose Backend is not the simulator: one seed's
	// scenario where fx says (its Backend, Resource and Agents), in opts'
	// modes, with opts' subscribers. Such
	// fixtures fail with ErrNoRunner without one; their seeds run one at a
	// time.
	Runner RealRunner
}

// RealRunner runs one seed of a fixture on a real backend.
type RealRunner func(ctx context.Context, fx *Fixture, sc spec.Scenario, opts harness.RunOptions) (*harness.Result, error)

// ErrNoRunner: a fixture names a real-time backend and RunOptions has no
// Runner for it.
var ErrNoRunner = errors.New("scenario: the fixture's backend needs a real-time runner")

// Outcome is what running a fixture found.
type Outcome struct {
	Fixture *Fixture
	// Seeds holds one SeedOutcome per seed that ran to its end, in seed
	// order.
	Seeds   []SeedOutcome
	Elapsed time.Duration
	// Err is why the run stopped before every seed was checked (ctx ended),
	// or nil.
	Err error
}

// SeedOutcome is one seed's result and the expectations it failed.
type SeedOutcome struct {
	Seed     uint64
	Result   *harness.Result
	Failures []Failure
}

// Failure is one expectation one seed did not meet.
type Failure struct {
	Seed        uint64
	Expectation Expectation
	Got         string // what the report showed instead
}

func (f Failure) String() string {
	return fmt.Sprintf("seed %d: %s: want %s, got %s", f.Seed, f.Expectation.Field, f.Expectation.Want, f.Got)
}

// Passed reports whether every seed ran and met every expectation.
func (o *Outcome) Passed() bool {
	return o.Err == nil && len(o.Seeds) == len(o.Fixture.Seeds) && len(o.Failures()) == 0
}

// Failures lists every failed expectation, seed by seed.
func (o *Outcome) Failures() []Failure {
	var out []Failure
	for _, s := range o.Seeds {
		out = append(out, s.Failures...)
	}
	return out
}

// Run runs the fixture's scenario once per seed, in its modes, and checks
// every expectation against every seed's result. If ctx ends, it returns
// what it had, with Outcome.Err set.
func (fx *Fixture) Run(ctx context.Context, opts RunOptions) *Outcome {
	start := time.Now()
	var kinds []history.Kind
	for _, e := range fx.Expect {
		kinds = append(kinds, e.Events...)
	}
	results := make([]*SeedOutcome, len(fx.Seeds))
	jobs := opts.Jobs
	if fx.Backend != "" && fx.Backend != BackendSim {
		jobs = 1 // real time: seeds one after another, each on its own backend
	}
	err := harness.Parallel(ctx, len(fx.Seeds), jobs, func(i int) error {
		so, err := fx.runSeed(ctx, fx.Seeds[i], kinds, opts.Runner)
		results[i] = so
		return err
	}, opts.Progress)
	out := &Outcome{Fixture: fx, Err: err}
	for _, so := range results {
		if so != nil {
			out.Seeds = append(out.Seeds, *so)
		}
	}
	out.Elapsed = time.Since(start)
	return out
}

// runSeed runs one seed and checks it; it records the events of the kinds
// the timeline expectations read, and only those.
func (fx *Fixture) runSeed(ctx context.Context, seed uint64, kinds []history.Kind,
	runner RealRunner) (*SeedOutcome, error) {
	sc := fx.Scenario
	sc.Seed = seed
	var events []history.Event
	opts := harness.RunOptions{Modes: fx.Modes}
	if len(kinds) > 0 {
		opts.Subscribers = []harness.Subscriber{harness.SubscriberFunc(func(e history.Event) {
			if slices.Contains(kinds, e.Kind) {
				events = append(events, e)
			}
		})}
	}
	run := harness.Run
	if fx.Backend != "" && fx.Backend != BackendSim {
		if runner == nil {
			return nil, fmt.Errorf("%s: backend %s: %w", fx.Name, fx.Backend, ErrNoRunner)
		}
		run = func(ctx context.Context, sc spec.Scenario, opts harness.RunOptions) (*harness.Result, error) {
			return runner(ctx, fx, sc, opts)
		}
	}
	res, err := run(ctx, sc, opts)
	if err != nil {
		return nil, fmt.Errorf("%s seed %d: %w", fx.Name, seed, err)
	}
	so := &SeedOutcome{Seed: seed, Result: res}
	for _, e := range fx.Expect {
		if ok, got := e.Check(res, events); !ok {
			so.Failures = append(so.Failures, Failure{Seed: seed, Expectation: e, Got: got})
		}
	}
	return so, nil
}
