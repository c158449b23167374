package spec_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/spec"
)

// The battery is valid scenarios, each named as its entry, none scripted
// (each draws its faults from its seed), short enough together that a
// correct lock goes through it in under a minute of wall time.
func TestBattery(t *testing.T) {
	seen := map[string]bool{}
	var total time.Duration
	for _, b := range spec.Battery() {
		sc := b.Scenario
		if err := sc.Validate(); err != nil {
			t.Errorf("%s: %v", b.Name, err)
		}
		if sc.Name != b.Name || seen[b.Name] || b.Catches == "" {
			t.Errorf("entry %q: scenario %q, catches %q: want a name of its own, its scenario's, and what it catches", b.Name, sc.Name, b.Catches)
		}
		seen[b.Name] = true
		if len(sc.Script) > 0 {
			t.Errorf("%s is scripted: the battery draws its faults", b.Name)
		}
		if len(sc.Restarts) == 0 {
			total += sc.Duration // a user's lock plays no restart
		}
	}
	if total > 40*time.Second {
		t.Errorf("the battery lasts %s of scenario time for a user's lock: over the 40s that leave a minute's wall time room", total)
	}
	a, b := spec.Battery(), spec.Battery()
	a[0].Scenario.Agents++
	if a[0].Scenario.Agents == b[0].Scenario.Agents {
		t.Error("Battery returns shared scenarios: a caller's change reached another's")
	}
}
