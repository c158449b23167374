package spec_test

import (
	"errors"
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
		{"pause leader", spec.Etcd{Members: 3, Faults: []spec.MemberFault{{At: s, Do: spec.PauseLeader, Duration: s}}}, ""},
		{"partition the leader", spec.Etcd{Faults: []spec.MemberFault{{At: s, Do: spec.PartitionMember, Duration: s}}}, ""},
		{"delay a member", spec.Etcd{Members: 5, Faults: []spec.MemberFault{{Do: spec.PartitionMember, Member: 5, Duration: s, Delay: 50 * time.Millisecond}}}, ""},
		{"too few members", spec.Etcd{Members: 2, Faults: []spec.MemberFault{{Do: spec.PauseLeader, Duration: s}}}, "etcd.members"},
		{"too many members", spec.Etcd{Members: 9}, "etcd.members"},
		{"unknown fault", spec.Etcd{Faults: []spec.MemberFault{{Do: "crash_member", Duration: s}}}, "etcd.faults[0].do"},
		{"no duration", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.PauseLeader}}}, "etcd.faults[0].duration"},
		{"after the run", spec.Etcd{Faults: []spec.MemberFault{{At: time.Hour, Do: spec.PauseLeader, Duration: s}}}, "etcd.faults[0].at"},
		{"pause names no member", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.PauseMember, Duration: s}}}, "etcd.faults[0].member"},
		{"member beyond the cluster", spec.Etcd{Members: 3, Faults: []spec.MemberFault{{Do: spec.PauseMember, Member: 4, Duration: s}}}, "etcd.faults[0].member"},
		{"leader named", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.PauseLeader, Member: 1, Duration: s}}}, "etcd.faults[0].member"},
		{"delay of a pause", spec.Etcd{Faults: []spec.MemberFault{{Do: spec.PauseMember, Member: 1, Duration: s, Delay: s}}}, "etcd.faults[0].delay"},
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
