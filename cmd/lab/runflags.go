package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// runFlags are the flags lab run and lab run battery share, defined once:
// which contenders run, on which backend, --json and --stop-at-first.
type runFlags struct {
	modes       modeFlags
	backend     backendFlags
	json        bool
	stopAtFirst bool
}

// register defines the shared flags on fs; jsonHelp says what --json
// prints, a report or the battery's document. Knob flags go first: the
// backend's flags make --agents also take how the agents run.
func (rf *runFlags) register(fs *flag.FlagSet, jsonHelp string) {
	rf.modes.register(fs, "run")
	fs.BoolVar(&rf.json, "json", false, jsonHelp)
	fs.BoolVar(&rf.stopAtFirst, "stop-at-first", false, "end a run at the first counterexample of a lock's own safety (mutual exclusion, the lease contract), and the battery with it")
	rf.backend.register(fs)
}

// configModes checks the flags bf and mf against sc, the backend first:
// the real-time configuration (nil for the simulator), the backend that
// runs it, and the modes that run, mf's, else fx's (a fixture's), else
// the lab's own two, each checked against that backend.
func configModes(bf *backendFlags, mf *modeFlags, fx *scenario.Fixture, sc spec.Scenario) (*realtime.Config, string, []history.Mode, error) {
	rc, err := bf.config(sc)
	if err != nil {
		return nil, "", nil, err
	}
	backend := registry.Sim
	if rc != nil {
		backend = rc.Backend
	}
	modes, err := mf.modes(fx, backend, sc)
	if err != nil {
		return nil, "", nil, err
	}
	return rc, backend, modes, nil
}

// stopAtFirstApplies reports why --stop-at-first cannot end a run of cfg
// early, or nil. The watch that ends it (realtime.LockWatch) hears the
// in-process real-time runner's events as they happen: the simulator runs
// a scenario whole in a fraction of a second, and the process driver's
// runs take no watch.
func stopAtFirstApplies(cfg *runConfig, bf *backendFlags) error {
	switch {
	case cfg.real == nil:
		var names []string
		for _, e := range registry.All(registry.Backends) {
			if e.Real {
				names = append(names, e.Name)
			}
		}
		return fmt.Errorf("--stop-at-first: the simulator runs the whole scenario in virtual time, in a fraction of a second; "+
			"stopping a run at its first counterexample needs a real-time --backend (%s)", registry.OneOfNames(names))
	case bf.processes():
		return fmt.Errorf("--stop-at-first: %s: the watch that stops a run at its first counterexample hears "+
			"the events of agents in-process only", bf.agentsAs())
	}
	return nil
}

// errStopAtFirstSweep: --lock-delays runs a scenario many times for one
// table of counts, which a run cut short would leave incomplete.
var errStopAtFirstSweep = errors.New("--lock-delays runs the scenario many times and prints one table of its counts: no --stop-at-first")

// stoppedAtFirst is the report's word on a run --stop-at-first ended at
// instant at, at the first counterexample of mode's lock.
func stoppedAtFirst(mode history.Mode, at time.Duration) report.Stop {
	return report.Stop{Interrupted: true, At: at,
		By: fmt.Sprintf("the first counterexample of a lock's own safety (--stop-at-first: %s's lock finding broke)", mode)}
}
