package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Etcd is what a scenario asks of an embedded etcd cluster: its size, and
// faults between its members. Only the real-time etcd backend plays it;
// the simulator's coordinator has no members: it ignores the size, and
// refuses the faults (ErrNeedsEtcd) rather than run without them.
type Etcd struct {
	// Members is the cluster's size (0: as the run's configuration
	// says). A cluster of more than one member runs each member as its
	// own process behind proxies the run owns.
	Members int `json:"members,omitempty"`
	// Faults are the faults between the members, at instants of the run.
	Faults []MemberFault `json:"faults,omitempty"`
}

// ErrNeedsEtcd refuses a scenario with etcd member faults where no etcd
// members run: the simulator.
var ErrNeedsEtcd = errors.New("etcd member faults (etcd.faults) need the real-time etcd backend (--backend etcd)")

// MemberFault is one fault of an etcd member, from At for Duration. Do
// is one of MemberFaults: FaultPartitionMember cuts member Member (the
// leader at At, if it names none) off from the other members and from
// every client, both ways (with Delay its traffic is held back that long
// instead of cut); FaultPauseMember stops member Member's process
// (SIGSTOP); FaultPauseLeader stops whichever member leads at At.
type MemberFault struct {
	At       time.Duration `json:"at"`
	Do       Fault         `json:"do"`
	Member   int           `json:"member,omitempty"` // from 1; partition_member (0: the leader) and pause_member
	Duration time.Duration `json:"duration"`
	// Delay, for partition_member, delays the member's traffic by this
	// much instead of cutting it.
	Delay time.Duration `json:"delay,omitempty"`
}

// MaxEtcdMembers is the largest cluster a scenario may ask for: etcd's
// own advice is at most seven members.
const MaxEtcdMembers = 7

// MinFaultMembers is the smallest cluster member faults may be played
// on: the members left when one is cut off or paused must still be a
// majority.
const MinFaultMembers = 3

func (s *Scenario) validateEtcd(bad complaint) {
	e := s.Etcd
	if e.Members < 0 || e.Members > MaxEtcdMembers {
		bad("etcd.members", "must be in [1, %d], got %d", MaxEtcdMembers, e.Members)
	}
	if len(e.Faults) > 0 && e.Members != 0 && e.Members < MinFaultMembers {
		bad("etcd.members", "member faults need at least %d members, got %d", MinFaultMembers, e.Members)
	}
	for i, f := range e.Faults {
		field := fmt.Sprintf("etcd.faults[%d]", i)
		if f.At < 0 || f.At > s.Duration {
			bad(field+".at", "must be in [0, duration], got %v", f.At)
		}
		if f.Duration <= 0 || f.Duration > MaxDuration {
			bad(field+".duration", "must be in (0, %v], got %v", MaxDuration, f.Duration)
		}
		switch f.Do {
		case FaultPartitionMember, FaultPauseMember:
			if (f.Member < 1 && (f.Do == FaultPauseMember || f.Member != 0)) || f.Member > MaxEtcdMembers || (e.Members > 0 && f.Member > e.Members) {
				bad(field+".member", "must name a member, from 1 to etcd.members (at most %d), got %d", MaxEtcdMembers, f.Member)
			}
		case FaultPauseLeader:
			if f.Member != 0 {
				bad(field+".member", "pause_leader pauses whichever member leads: name none, got %d", f.Member)
			}
		default:
			bad(field+".do", "%s", badMemberFault(f.Do))
		}
		if f.Delay < 0 || f.Delay > MaxDuration {
			bad(field+".delay", "must be in [0, %v], got %v", MaxDuration, f.Delay)
		} else if f.Delay > 0 && f.Do != FaultPartitionMember {
			bad(field+".delay", "only partition_member delays traffic")
		}
	}
}

// badMemberFault says why do is no member fault; an older spelling with
// dashes ("partition-member") is named as such, with its one spelling now.
func badMemberFault(do Fault) string {
	names := make([]string, len(MemberFaults))
	for i, f := range MemberFaults {
		names[i] = string(f)
	}
	last := len(names) - 1
	msg := fmt.Sprintf("must be %s or %s, got %q", strings.Join(names[:last], ", "), names[last], do)
	if f, ok := respelled(do); ok && f.Member() {
		msg += fmt.Sprintf(" (the old spelling: fault kinds are spelled with underscores, write %s)", f)
	}
	return msg
}
