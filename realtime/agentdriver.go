package realtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// AgentDriver is what runs a scenario's agents on an opened setup,
// registered under its registry name (registry.Drivers) from an init
// function: the runner's own goroutines (registry.InProcess, below), or
// agents as processes (procdriver). A program then runs the driver a
// flag or a fixture names knowing none of them.
type AgentDriver struct {
	// Check reports why agents run this way cannot play sc with c in
	// modes, beyond what the driver's registry entry refuses: an error
	// that wraps Refused, its text Refused's followed by ": " and the
	// reason. nil checks nothing more.
	Check func(c Config, sc spec.Scenario, modes ...history.Mode) error
	// Refused is what every refusal of Check wraps.
	Refused error
	// New prepares a run of the setup's scenario in opts' modes.
	New func(s *Setup, opts RunOptions) (AgentRun, error)
}

// AgentRun is a run prepared by a driver: its header is known before the
// first event.
type AgentRun interface {
	Header() history.Header
	// Run runs the scenario for its duration, or until ctx ends, and
	// returns the verdict.
	Run(ctx context.Context) (*Result, error)
}

// ErrNoDriver: the name given for how the agents run has no driver this
// program links.
var ErrNoDriver = errors.New("no driver for the agents")

func init() {
	registry.SetOpener(registry.Drivers, registry.InProcess, AgentDriver{
		New: func(s *Setup, opts RunOptions) (AgentRun, error) { return s.NewRunner(opts) },
	})
}

// DriverFor is the driver registered as name (a registry.Drivers entry).
func DriverFor(name string) (AgentDriver, error) {
	if err := registry.Choice(registry.Drivers, name); err != nil {
		return AgentDriver{}, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	d, ok := registry.Opener[AgentDriver](registry.Drivers, name)
	if !ok {
		return AgentDriver{}, fmt.Errorf("%w: this program does not link the driver %s (procdriver registers process)", ErrNoDriver, name)
	}
	return d, nil
}

// RunScenarioAs runs sc as RunScenario does, its agents run by the driver
// registered as agents: checked, then on a setup opened for it (its
// contenders' servers brought up) and closed after.
func RunScenarioAs(ctx context.Context, agents string, c Config, sc spec.Scenario, opts RunOptions) (*Result, error) {
	d, err := DriverFor(agents)
	if err != nil {
		return nil, err
	}
	if d.Check != nil {
		if err := d.Check(c, sc, opts.Modes...); err != nil {
			return nil, err
		}
	}
	s, err := Open(ctx, c, sc)
	if err != nil {
		return nil, err
	}
	if err := s.OpenContenders(ctx, opts.Modes); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	r, err := d.New(s, opts)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	res, err := r.Run(ctx)
	return res, errors.Join(err, s.Close())
}
