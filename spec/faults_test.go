package spec_test

import (
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
		spec.FaultPartitionMember: func(s *spec.Scenario) {
			s.Etcd.Faults = []spec.MemberFault{{Do: spec.FaultPartitionMember}}
		},
		spec.FaultPauseMember: func(s *spec.Scenario) { s.Etcd.Faults = []spec.MemberFault{{Do: spec.FaultPauseMember}} },
		spec.FaultPauseLeader: func(s *spec.Scenario) { s.Etcd.Faults = []spec.MemberFault{{Do: spec.FaultPauseLeader}} },
		spec.FaultDrop:        func(s *spec.Scenario) { s.Network.Duplicate = 0.1 },
		spec.FaultPush:        func(s *spec.Scenario) { s.Push.Enabled = true },
	}
	for _, f := range spec.RedisFaults {
		set[f] = func(s *spec.Scenario) { s.Redis.Faults = []spec.RedisFault{{Do: f}} }
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
