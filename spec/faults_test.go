package spec_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/leasefence/lab/spec"
)

// Each fault kind has its key and is asked for by a scenario that sets
// that key, and by no other.
func TestFaults(t *testing.T) {
	set := map[spec.Fault]func(*spec.Scenario){
		spec.FaultPartition: func(s *spec.Scenario) { s.Partitions = []spec.Partition{{Agent: "agent-1"}} },
		spec.FaultRestart:   func(s *spec.Scenario) { s.Restarts = []spec.Restart{{At: 1}} },
		spec.FaultCrash:     func(s *spec.Scenario) { s.Crashes = []spec.Crash{{Agent: "agent-1"}} },
		spec.FaultDrop:      func(s *spec.Scenario) { s.Network.Duplicate = 0.1 },
		spec.FaultPush:      func(s *spec.Scenario) { s.Push.Enabled = true },
	}
	for _, f := range spec.TimedFaults() {
		set[f] = func(s *spec.Scenario) { s.Faults = []spec.TimedFault{{Do: f}} }
	}
	if len(set) != len(spec.Faults) {
		t.Fatalf("%d faults tested, %d listed", len(set), len(spec.Faults))
	}
	for _, f := range spec.Faults {
		if f.Field() == "" {
			t.Errorf("%s has no key", f)
		}
		var sc spec.Scenario
		set[f](&sc)
		for _, g := range spec.Faults {
			if got := sc.Has(g); got != (g == f) {
				t.Errorf("a scenario setting %s: Has(%s) = %v", f.Field(), g, got)
			}
		}
	}
}

// The history's documentation names every fault kind a fault_began may
// carry: every kind but those played message by message, whose record is
// each message's own event.
func TestHistoryDocListsFaultKinds(t *testing.T) {
	doc, err := os.ReadFile("../history/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(string(doc), "fault_began            the run played a fault")
	list, _, _ = strings.Cut(list, "fault_ended")
	for _, f := range spec.Faults {
		if !f.PerMessage() && !regexp.MustCompile(`\b`+string(f)+`\b`).MatchString(list) {
			t.Errorf("history/doc.go's fault_began does not name %s", f)
		}
	}
}
