package spec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/spec"
)

// Each entry of the faults list out of range, or asking what its kind
// does not take, is refused, naming its field; the good ones validate.
func TestTimedFaultsValidate(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name   string
		etcd   spec.Etcd
		faults []spec.TimedFault
		field  string // "" when it validates
	}{
		{"pause leader", spec.Etcd{Members: 3}, []spec.TimedFault{{At: s, Do: spec.FaultPauseLeader, Duration: s}}, ""},
		{"partition the leader", spec.Etcd{}, []spec.TimedFault{{At: s, Do: spec.FaultPartitionMember, Duration: s}}, ""},
		{"delay a member", spec.Etcd{Members: 5}, []spec.TimedFault{{Do: spec.FaultPartitionMember, Member: 5, Duration: s, Delay: 50 * time.Millisecond}}, ""},
		{"too few members", spec.Etcd{Members: 2}, []spec.TimedFault{{Do: spec.FaultPauseLeader, Duration: s}}, "etcd.members"},
		{"too many members", spec.Etcd{Members: 9}, nil, "etcd.members"},
		{"unknown fault", spec.Etcd{}, []spec.TimedFault{{Do: "crash_member", Duration: s}}, "faults[0].do"},
		{"no duration", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultPauseLeader}}, "faults[0].duration"},
		{"after the run", spec.Etcd{}, []spec.TimedFault{{At: time.Hour, Do: spec.FaultPauseLeader, Duration: s}}, "faults[0].at"},
		{"pause names no member", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultPauseMember, Duration: s}}, "faults[0].member"},
		{"member beyond the cluster", spec.Etcd{Members: 3}, []spec.TimedFault{{Do: spec.FaultPauseMember, Member: 4, Duration: s}}, "faults[0].member"},
		{"leader named", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultPauseLeader, Member: 1, Duration: s}}, "faults[0].member"},
		{"old spelling", spec.Etcd{}, []spec.TimedFault{{Do: "partition-member", Duration: s}}, "faults[0].do"},
		{"no member fault", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultRestart, Duration: s}}, "faults[0].do"},
		{"delay of a pause", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultPauseMember, Member: 1, Duration: s, Delay: s}}, "faults[0].delay"},
		{"primary failed over", spec.Etcd{}, []spec.TimedFault{{At: s, Do: spec.FaultKillPrimary, Duration: spec.MinRedisFault}}, ""},
		{"primary too short", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultPausePrimary, Duration: s}}, "faults[0].duration"},
		{"primary named a member", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultPausePrimary, Member: 1, Duration: spec.MinRedisFault}}, "faults[0]"},
		{"primaries overlap", spec.Etcd{}, []spec.TimedFault{{Do: spec.FaultPausePrimary, Duration: 3 * s},
			{At: s, Do: spec.FaultPauseLeader, Duration: s}, {At: 2 * s, Do: spec.FaultKillPrimary, Duration: 3 * s}}, "faults[2].at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, _ := spec.Builtin("overlap")
			sc.Etcd, sc.Faults = tc.etcd, tc.faults
			err := sc.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *spec.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, spec.ErrInvalidScenario) {
				t.Fatalf("got %v, want an error on %s", err, tc.field)
			}
			if strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("more than one problem: %v", err)
			}
		})
	}
}

// A member fault spelled the old way, with dashes, is refused with its
// one spelling named; a kind the faults list does not hold is refused,
// naming the kinds it does.
func TestMemberFaultSpelling(t *testing.T) {
	for do, want := range map[spec.Fault]string{
		"partition-member": `got "partition-member" (the old spelling: fault kinds are spelled with underscores, write partition_member)`,
		"pause-leader":     "write pause_leader",
		spec.FaultRestart:  `must be partition_member, pause_member, pause_leader, pause_primary, kill_primary, partition_primary or kill_connections, got "restart"`,
	} {
		sc, _ := spec.Builtin("overlap")
		sc.Faults = []spec.TimedFault{{Do: do, Duration: time.Second}}
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("do: %s: got %v, want %q", do, err, want)
		}
		if do == spec.FaultRestart && strings.Contains(fmt.Sprint(sc.Validate()), "old spelling") {
			t.Errorf("restart is named an old spelling")
		}
	}
}
