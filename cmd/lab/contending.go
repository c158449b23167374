package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// modeFlags choose the contenders a run puts under its scenario:
// --contenders a,b,c, or --mode, the older spelling of a choice among
// the lab's own two (--mode fenced is --contenders fenced).
type modeFlags struct {
	mode, contenders string
	modeGiven        bool
	contendersGiven  bool
}

func (mf *modeFlags) register(fs *flag.FlagSet, verb string) {
	mf.mode = "both"
	fs.Var(givenString{&mf.mode, &mf.modeGiven}, "mode", "which of the lab's own modes to "+verb+": fenced, naive or both (--mode fenced is --contenders fenced)")
	fs.Var(givenString{&mf.contenders, &mf.contendersGiven}, "contenders", "the locks to "+verb+", side by side on the same faults: `NAME,...` "+
		"(default naive,fenced; lab contenders lists them; NAME:fenced or NAME:naive says how its holders write, which must be its own discipline)")
}

// modes are the contenders the flags choose, else fx's (a fixture's
// contenders or modes key), else the lab's own two; checked against
// backend and sc before anything runs.
func (mf *modeFlags) modes(fx *scenario.Fixture, backend string, sc spec.Scenario) ([]history.Mode, error) {
	var modes []history.Mode
	var err error
	switch {
	case mf.modeGiven && mf.contendersGiven:
		return nil, errors.New("--mode and --contenders: give one (--mode " + mf.mode + " is --contenders " + modeAsContenders(mf.mode) + ")")
	case mf.contendersGiven:
		if modes, err = registry.ParseContenders(strings.Split(mf.contenders, ",")); err != nil {
			return nil, fmt.Errorf("--contenders: %w", err)
		}
	case mf.modeGiven:
		if modes, err = registry.ParseModes(mf.mode); err != nil {
			return nil, fmt.Errorf("--mode: must be fenced, naive or both, got %q", mf.mode)
		}
	case fx != nil && len(fx.Modes) > 0:
		modes = fx.Modes
	default:
		modes = registry.Modes()
	}
	if err := registry.CheckContenders(modes, backend, sc); err != nil {
		return nil, fmt.Errorf("%s: %w", mf.flag(), err)
	}
	return modes, nil
}

// flag names the flag that chose the contenders, for an error to name it.
func (mf *modeFlags) flag() string {
	if mf.modeGiven {
		return "--mode"
	}
	return "--contenders"
}

// args are the flags as given, for a command that reproduces the run.
func (mf *modeFlags) args() []string {
	switch {
	case mf.contendersGiven:
		return []string{"--contenders=" + mf.contenders}
	case mf.modeGiven && mf.mode != "both":
		return []string{"--mode=" + mf.mode}
	}
	return nil
}

func modeAsContenders(mode string) string {
	if mode != "both" && mode != "" {
		return mode
	}
	var names []string
	for _, m := range registry.Modes() {
		names = append(names, string(m))
	}
	return strings.Join(names, ",")
}
