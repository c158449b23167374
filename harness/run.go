package harness

import (
	"context"
	"fmt"
	"github.com/leasefence/lab/spec"
	"slices"
	"time"

	"github.com/leasefence/lab/history"
)

// Modes lists the modes a run can do, in the order reports show them.
var Modes = []Mode{Naive, Fenced}

// ParseModes reads "fenced", "naive" or "both". The slice is the caller's
// own: changing it changes nothing else.
func ParseModes(s string) ([]Mode, error) {
	switch s {
	case "both", "":
		return slices.Clone(Modes), nil
	case string(Fenced):
		return []Mode{Fenced}, nil
	case string(Naive):
		return []Mode{Naive}, nil
	}
	return nil, fmt.Errorf("%w: mode must be fenced, naive or both, got %q", spec.ErrInvalidScenario, s)
}

// RunOptions configures Run.
type RunOptions struct {
	// Modes to run (default both), each on the same scenario and seed.
	Modes []Mode
	// Subscribers receive every event of every mode, mode by mode.
	Subscribers []Subscriber
}

// Run runs sc as fast as possible in each mode and checks each history.
// The same scenario and seed always give the same Result, digest included.
// If ctx is cancelled it returns what it had, with ctx.Err().
func Run(ctx context.Context, sc spec.Scenario, opts RunOptions) (*Result, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if sc.OverTheWire() {
		return nil, fmt.Errorf("harness: %w: the simulator keeps its resources in memory", spec.ErrOverTheWire)
	}
	if len(sc.Crashes) > 0 {
		return nil, fmt.Errorf("harness: %w: the simulator's agents are not processes", spec.ErrNeedsProcesses)
	}
	if len(sc.Etcd.Faults) > 0 {
		return nil, fmt.Errorf("harness: %w: the simulator's coordinator has no members", spec.ErrNeedsEtcd)
	}
	modes := opts.Modes
	if len(modes) == 0 {
		modes = Modes
	}
	h := sc.Header(modes)
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
func SelfCheck(ctx context.Context, sc spec.Scenario, modes []Mode) (*Result, error) {
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
