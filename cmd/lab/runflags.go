package main

import (
	"flag"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// runFlags are the flags lab run and lab run battery share, defined once:
// which contenders run, on which backend, and --json.
type runFlags struct {
	modes   modeFlags
	backend backendFlags
	json    bool
}

// register defines the shared flags on fs; jsonHelp says what --json
// prints, a report or the battery's document. Knob flags go first: the
// backend's flags make --agents also take how the agents run.
func (rf *runFlags) register(fs *flag.FlagSet, jsonHelp string) {
	rf.modes.register(fs, "run")
	fs.BoolVar(&rf.json, "json", false, jsonHelp)
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
