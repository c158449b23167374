package procdriver

import (
	"context"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// Agents as processes are the driver registry.Process: a program that
// links this package runs them where a flag or a fixture names the
// driver (realtime.DriverFor), knowing none of its types.
func init() {
	registry.SetOpener(registry.Drivers, registry.Process, realtime.AgentDriver{
		Check: func(c realtime.Config, sc spec.Scenario, modes ...history.Mode) error {
			return Check(c, sc, modes...)
		},
		Refused: ErrCannotPlay,
		New: func(s *realtime.Setup, opts realtime.RunOptions) (realtime.AgentRun, error) {
			r, err := New(s, Options{Modes: opts.Modes, Subscribers: opts.Subscribers})
			if err != nil {
				return nil, err
			}
			return &agentRun{Runner: r}, nil
		},
	})
}

// agentRun is a Runner as a realtime.AgentRun: Run returns the runner's
// result, and Processes what the processes went through.
type agentRun struct {
	*Runner
	processes map[history.Mode]ProcessStats
}

func (a *agentRun) Run(ctx context.Context) (*realtime.Result, error) {
	res, err := a.Runner.Run(ctx)
	if res == nil {
		return nil, err
	}
	a.processes = res.Processes
	return res.Result, err
}

// Processes is what each mode's processes went through in the run: the
// counts the report gives beside the verdict.
func (a *agentRun) Processes() map[history.Mode]ProcessStats { return a.processes }
