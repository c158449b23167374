package labtest

import (
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// batteryEntry is one scenario of the battery Check runs.
type batteryEntry struct {
	name string
	// sc is the scenario to run as it is, the lock under test its one
	// mode: runScenario(t, e.sc, lock, c) runs it as Check does (Run's
	// steps after loading a scenario), or realtime.New(e.sc,
	// realtime.Options{...}) with the lock as the Backend's Contender.
	sc spec.Scenario
	// catches is the class of bug the scenario is there to catch.
	catches string
	// leftOut, if set, says why a user's lock is not put through sc: the
	// entry is not run, and Check logs the note; never a failure of the
	// lock's.
	leftOut string
}

// battery is the default battery for a user's lock: spec.Battery, the one
// list lab run battery runs too, each entry left out (leftOut) when a
// user's lock cannot play its faults (the lab cannot restart a user's
// lock's server, so restart is left out).
func battery() []batteryEntry {
	var out []batteryEntry
	for _, b := range spec.Battery() {
		e := batteryEntry{name: b.Name, sc: b.Scenario, catches: b.Catches}
		if err := checkUserLock("lock", b.Scenario); err != nil {
			e.leftOut = err.Error()
		}
		out = append(out, e)
	}
	return out
}

// checkUserLock refuses a scenario a user's lock cannot play: what
// registry.CheckLock refuses of any lock not the lab's own, and a
// coordinator restart, which the lab cannot do to a server it did not
// start.
func checkUserLock(name string, sc spec.Scenario) error {
	if err := registry.CheckLock(name, sc); err != nil {
		return err
	}
	if registry.Restarts.In(sc) {
		return &registry.ContenderError{Name: name, Problem: "cannot play " + registry.Restarts.What + " (" + registry.Restarts.Field + ") of " + sc.Name +
			": the lab cannot restart a user's lock's server (labtest.Check leaves such a scenario out of its battery)"}
	}
	return nil
}
