package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// simulator is the simulator's entry in the registry: what it can play.
var simulator = registry.Must(registry.Backends, registry.Sim)

// simContenders names the contenders the simulator runs.
func simContenders() []string {
	var out []string
	for _, c := range registry.All(registry.Contenders) {
		if c.RunsOnBackend(registry.Sim) == nil {
			out = append(out, c.Name)
		}
	}
	return out
}

// Modes lists the modes a run can do, in the order reports show them.
var Modes = registry.Modes()

// RunOptions configures Run.
type RunOptions struct {
	// Modes to run (default both), each on the same scenario and seed.
	Modes []history.Mode
	// Subscribers receive every event of every mode, mode by mode.
	Subscribers []history.Subscriber
}

// Run runs sc as fast as possible in each mode and checks each history.
// The same scenario and seed always give the same history.Result, digest included.
// If ctx is cancelled it returns what it had, with ctx.Err().
func Run(ctx context.Context, sc spec.Scenario, opts RunOptions) (*history.Result, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := simulator.CanPlay(sc); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	modes := opts.Modes
	if len(modes) == 0 {
		modes = Modes
	}
	h := registry.Header(sc, modes)
	res := history.NewResult(&h)
	for _, m := range modes {
		sim, err := NewSim(sc, m, opts.Subscribers...)
		if err != nil {
			return nil, err
		}
		rep, err := sim.Run(ctx)
		res.Add(rep)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// SelfCheck runs sc twice in each mode and fails if the two runs differ in
// any event: the determinism the digest promises.
func SelfCheck(ctx context.Context, sc spec.Scenario, modes []history.Mode) (*history.Result, error) {
	first, err := Run(ctx, sc, RunOptions{Modes: modes})
	if err != nil {
		return first, err
	}
	second, err := Run(ctx, sc, RunOptions{Modes: modes})
	if err != nil {
		return second, err
	}
	if first.Digest != second.Digest {
		return first, fmt.Errorf("harness: %s seed %d is not deterministic: digest %s then %s", sc.Name, sc.Seed, first.Digest, second.Digest)
	}
	return first, nil
}

// Compression is virtual seconds simulated per wall second.
func Compression(virtual, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return virtual.Seconds() / wall.Seconds()
}
