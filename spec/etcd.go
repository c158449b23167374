package spec

import (
	"errors"
	"strconv"
)

// Etcd is what a scenario asks of an embedded etcd cluster: its size.
// Only the real-time etcd backend plays it, and the faults of its members
// (the faults list's partition_member, pause_member and pause_leader);
// the simulator's coordinator has no members: it ignores the size, and
// refuses the faults (ErrNeedsEtcd) rather than run without them.
type Etcd struct {
	// Members is the cluster's size (0: as the run's configuration
	// says). A cluster of more than one member runs each member as its
	// own process behind proxies the run owns.
	Members int `json:"members,omitempty"`
}

// ErrNeedsEtcd refuses a scenario with etcd member faults where no etcd
// members run: the simulator.
var ErrNeedsEtcd = errors.New("etcd member faults (faults: partition_member, pause_member, pause_leader) need the real-time etcd backend (--backend etcd)")

// The faults of an etcd member, on the faults list: FaultPartitionMember
// cuts member Member (the leader at At, if it names none) off from the
// other members and from every client, both ways (with Delay its traffic
// is held back that long instead of cut); FaultPauseMember stops member
// Member's process (SIGSTOP); FaultPauseLeader stops whichever member
// leads at At.
const (
	// FaultPartitionMember: an etcd member (the leader, if it names none)
	// cut off from the other members and every client, or its traffic
	// delayed.
	FaultPartitionMember Fault = "partition_member"
	// FaultPauseMember: an etcd member's process stopped (SIGSTOP).
	FaultPauseMember Fault = "pause_member"
	// FaultPauseLeader: whichever etcd member leads at the instant,
	// stopped.
	FaultPauseLeader Fault = "pause_leader"
)

// MemberFaults lists the faults of an etcd member.
var MemberFaults = []Fault{FaultPartitionMember, FaultPauseMember, FaultPauseLeader}

// MaxEtcdMembers is the largest cluster a scenario may ask for: etcd's
// own advice is at most seven members.
const MaxEtcdMembers = 7

// MinFaultMembers is the smallest cluster member faults may be played
// on: the members left when one is cut off or paused must still be a
// majority.
const MinFaultMembers = 3

// memberKind is what the faults list holds of a fault of an etcd member.
var memberKind = timedKind{
	aim: func(f TimedFault) string {
		if f.Member == 0 {
			return "etcd leader"
		}
		return MemberTarget(f.Member, false)
	},
	validate: func(s *Scenario, i int, bad complaint) {
		f, field, n := s.Faults[i], faultField(i), s.Etcd.Members
		if f.Do == FaultPauseLeader {
			if f.Member != 0 {
				bad(field+".member", "pause_leader pauses whichever member leads: name none, got %d", f.Member)
			}
		} else if (f.Member < 1 && (f.Do == FaultPauseMember || f.Member != 0)) || f.Member > MaxEtcdMembers || (n > 0 && f.Member > n) {
			bad(field+".member", "must name a member, from 1 to etcd.members (at most %d), got %d", MaxEtcdMembers, f.Member)
		}
		if f.Delay > 0 && f.Do != FaultPartitionMember {
			bad(field+".delay", "only partition_member delays traffic")
		}
	},
}

// MemberTarget is the Target of an etcd member's fault: "etcd member 2",
// "etcd member 1 (the leader)".
func MemberTarget(member int, leader bool) string {
	t := "etcd member " + strconv.Itoa(member)
	if leader {
		t += " (the leader)"
	}
	return t
}

func (s *Scenario) validateEtcd(bad complaint) {
	e := s.Etcd
	if e.Members < 0 || e.Members > MaxEtcdMembers {
		bad("etcd.members", "must be in [1, %d], got %d", MaxEtcdMembers, e.Members)
	}
	if e.Members != 0 && e.Members < MinFaultMembers && s.hasAny(MemberFaults) {
		bad("etcd.members", "member faults need at least %d members, got %d", MinFaultMembers, e.Members)
	}
}
