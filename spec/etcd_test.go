package spec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/spec"
)

// Each member fault out of range is refused, naming its field; the good
// ones validate.
func TestMemberFaultsValidate(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name  string
		etcd  spec.Etcd
		field string // "" when it validates
	}{
		{"pause leader", spec.Etcd{Members: 3, Faults: []spec.MemberFault{{At: s, Do: spec.FaultPauseLeader, Duration: s}}}, ""},
		{"partition the leader", spec.Etcd{Faults: []spec.MemberFault{{At: s, Do: spec.FaultPartitionMember, Duration: s}}}, ""},
		{"delay a member", spec.Etcd{Members: 5, Faults: []spec.MemberFault{{Do: spec.FaultPartitionMember, Member: 5, Duration: s, Delay: 50 * time.Millisecond}}}, ""},
		{"too few members", spec.Etcd{Members: 2, Faults: []spec.MemberFault{{Do: spec.FaultPauseLeader, Duration: s}}}, "etcd.members"},
		{"too many members", spec.Etcd{Members: 9}, "etcd.members"},
		{"unknown fault", spec.Etcd{Faults: []spec.MemberFault{{Do: "crash_member", Duration: s}}}, "etcd.faults[0].do"},
		{"no duration", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.FaultPauseLeader}}}, "etcd.faults[0].duration"},
		{"after the run", spec.Etcd{Faults: []spec.MemberFault{{At: time.Hour, Do: spec.FaultPauseLeader, Duration: s}}}, "etcd.faults[0].at"},
		{"pause names no member", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.FaultPauseMember, Duration: s}}}, "etcd.faults[0].member"},
		{"member beyond the cluster", spec.Etcd{Members: 3, Faults: []spec.MemberFault{{Do: spec.FaultPauseMember, Member: 4, Duration: s}}}, "etcd.faults[0].member"},
		{"leader named", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.FaultPauseLeader, Member: 1, Duration: s}}}, "etcd.faults[0].member"},
		{"old spelling", spec.Etcd{Faults: []spec.MemberFault{{Do: "partition-member", Duration: s}}}, "etcd.faults[0].do"},
		{"no member fault", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.FaultRestart, Duration: s}}}, "etcd.faults[0].do"},
		{"delay of a pause", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.FaultPauseMember, Member: 1, Duration: s, Delay: s}}}, "etcd.faults[0].delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, _ := spec.Builtin("overlap")
			sc.Etcd = tc.etcd
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
// one spelling named; another fault kind is refused as no member fault.
func TestMemberFaultSpelling(t *testing.T) {
	for do, want := range map[spec.Fault]string{
		"partition-member": `got "partition-member" (the old spelling: fault kinds are spelled with underscores, write partition_member)`,
		"pause-leader":     "write pause_leader",
		spec.FaultRestart:  `must be partition_member, pause_member or pause_leader, got "restart"`,
	} {
		sc, _ := spec.Builtin("overlap")
		sc.Etcd = spec.Etcd{Faults: []spec.MemberFault{{Do: do, Duration: time.Second}}}
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("do: %s: got %v, want %q", do, err, want)
		}
		if do == spec.FaultRestart && strings.Contains(fmt.Sprint(sc.Validate()), "old spelling") {
			t.Errorf("restart is named an old spelling")
		}
	}
}
