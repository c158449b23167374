package labtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
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

// BatteryFloor is the least the battery exercises of a correct lock on
// the in-memory store, summed over its scenarios: its guaranteed
// coverage. A run gives several times these counts (a test holds the
// battery to them); a lock that exercises less of them hides a path (a
// lock whose leases never end has no takeover at all), which the
// coverage finding names.
var BatteryFloor = history.CoverageCounts{
	ContendedGrants: 15, ExpiriesOfLiveHolders: 8, Renewals: 3, RenewalsAfterExpiry: 2,
	LateReleases: 4, Takeovers: 15, LostRepliesRetried: 15,
}

// BatteryResult is what Check found: each scenario's Result, in the
// battery's order (fewer when it stopped at a counterexample), the
// scenarios left out and why, and the findings summed over the battery.
type BatteryResult struct {
	Scenarios []*Result
	// LeftOut says each scenario the lock was not put through, and why.
	LeftOut []string
	// Findings are the lock's, writes' and coverage findings summed over
	// the battery (history.BatteryFindings).
	Findings history.Findings
	// Failed: Check failed the test.
	Failed bool
}

// Check puts lock through the default battery, a scenario after another
// in real time (see the package doc for what each catches and the
// coverage it guarantees), logging a line per scenario with its findings
// and counts, then the findings summed over the battery. It fails t as
// Run does for each scenario (a broken lock, a fenced discipline's stale
// writes, a call that never returned), naming the scenario and the
// history file it kept, and stops there unless KeepGoing. A finding left
// inconclusive is judged over the battery: it fails t only if no scenario
// put it to the test (unless AllowInconclusive). Options are Run's, for
// every scenario (Duration sets each one's length). A scenario a user's
// lock cannot play (a coordinator restart) is left out with a note,
// never charged to the lock.
func Check(t testing.TB, lock Lock, opts ...Option) *BatteryResult {
	t.Helper()
	return checkBattery(t, newConfig(opts), func(sc spec.Scenario, c config) *Result {
		t.Helper()
		return runScenario(t, sc, lock, c)
	})
}

// checkBattery runs each scenario of the battery a user's lock can play
// with run (which reports it, failing t as Run does, and returns nil when
// it refused the scenario), a line of progress each, stopping at the first
// that failed unless c.keepGoing, and judges the battery (judgeBattery).
// It returns nil if run refused a scenario.
func checkBattery(t testing.TB, c config, run func(sc spec.Scenario, c config) *Result) *BatteryResult {
	t.Helper()
	entries := battery()
	res := &BatteryResult{}
	var runs []history.BatteryRun
	for i, e := range entries {
		where := fmt.Sprintf("battery %d/%d", i+1, len(entries))
		if e.leftOut != "" {
			res.LeftOut = append(res.LeftOut, e.name+": "+e.leftOut)
			t.Logf("labtest: %s %s: left out: %s", where, e.name, e.leftOut)
			continue
		}
		one := c
		one.battery = where
		r := run(c.scenario(e.sc), one)
		if r == nil {
			return nil // refused: t has failed
		}
		res.Scenarios = append(res.Scenarios, r)
		runs = append(runs, history.BatteryRun{Scenario: e.name, Report: r.Report})
		if r.Failed {
			res.Failed = true
			if !c.keepGoing {
				t.Logf("labtest: the battery stopped at %s, the first scenario that failed (labtest.KeepGoing() runs the others)", e.name)
				break
			}
		}
	}
	return judgeBattery(t, c, runs, res)
}

// judgeBattery sums the findings of runs into res, logs them, and fails t
// on a finding the battery as a whole left inconclusive (unless
// c.inconclusive, or res has failed already).
func judgeBattery(t testing.TB, c config, runs []history.BatteryRun, res *BatteryResult) *BatteryResult {
	t.Helper()
	res.Findings = history.BatteryFindings(runs)
	name := cmp(c.name, "lock")
	t.Logf("labtest: %s on the battery (%s):\n%s", name, batteryNames(runs), formatFindings(res.Findings))
	if res.Failed || c.inconclusive {
		return res
	}
	for _, p := range []struct {
		name string
		f    history.Finding
	}{{"lock", res.Findings.Lock}, {"writes", res.Findings.Writes}} {
		if p.f.Verdict == history.FindingInconclusive {
			res.Failed = true
			t.Errorf("labtest: %s on the battery (%s): the %s finding is inconclusive: %s (labtest.AllowInconclusive() lets such a battery pass)",
				name, batteryNames(runs), p.name, p.f.Reason)
		}
	}
	return res
}

// batteryNames names the scenarios of runs.
func batteryNames(runs []history.BatteryRun) string {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.Scenario
	}
	return strings.Join(names, ", ")
}
