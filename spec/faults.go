package spec

import (
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/history"
)

// Fault is a kind of fault a scenario can put a run through. Faults is
// the one list of them, each spelled one way: the scenario file's words
// (etcd.faults' do), a history's fault events (their fault field), what a
// runner plays (package registry says, per backend, store and driver,
// which kinds it cannot play), and what a scenario asks for (Has).
//
// A fault played at an instant or over a span is recorded in the history
// as a fault_began event, and a fault_ended when a span ends (history's
// FaultBegan and FaultEnded, which carry the kind and its target). Drops
// and the push are played message by message over the whole run: their
// record is each message's own event (request_dropped, reply_dropped,
// request_duplicated, push_dropped).
type Fault string

// The faults, as scenario files, histories, refusals and listings name
// them.
const (
	// FaultPartition: an agent cut off from the coordinator (partitions).
	FaultPartition Fault = "partition"
	// FaultRestart: the coordinator restarted, its fence counter kept or
	// lost (restarts). An instant; the coordinator_restarted event after
	// it is the coordinator's own record of its new incarnation.
	FaultRestart Fault = "restart"
	// FaultCrash: an agent's process killed, and perhaps started again
	// (crashes).
	FaultCrash Fault = "crash"
	// FaultPartitionMember: an etcd member (the leader, if it names none)
	// cut off from the other members and every client, or its traffic
	// delayed (etcd.faults, do: partition_member).
	FaultPartitionMember Fault = "partition_member"
	// FaultPauseMember: an etcd member's process stopped (SIGSTOP)
	// (etcd.faults, do: pause_member).
	FaultPauseMember Fault = "pause_member"
	// FaultPauseLeader: whichever etcd member leads at the instant,
	// stopped (etcd.faults, do: pause_leader).
	FaultPauseLeader Fault = "pause_leader"
	// FaultDrop: messages between agents and coordinator dropped or
	// duplicated (network.drop_requests, drop_replies, duplicate).
	FaultDrop Fault = "drop"
	// FaultPush: the coordinator pushing each new fence to the gates, and
	// losing some of the pushes (push).
	FaultPush Fault = "push"
)

// Faults lists every fault kind.
var Faults = []Fault{FaultPartition, FaultRestart, FaultCrash, FaultPartitionMember, FaultPauseMember, FaultPauseLeader,
	FaultDrop, FaultPush, FaultPausePrimary, FaultKillPrimary, FaultPartitionPrimary}

// MemberFaults lists the faults of an etcd member: the kinds etcd.faults'
// do may name.
var MemberFaults = []Fault{FaultPartitionMember, FaultPauseMember, FaultPauseLeader}

// PerMessage reports whether f is played message by message over the
// whole run (drops, the push): its record is each message's own event,
// not the fault pair.
func (f Fault) PerMessage() bool { return f == FaultDrop || f == FaultPush }

// Member reports whether f is a fault of an etcd member.
func (f Fault) Member() bool {
	for _, m := range MemberFaults {
		if f == m {
			return true
		}
	}
	return false
}

// Began is the fault_began event of f played on agent (-1 for none) or
// else target, to last dur (0: an instant); its Ended is the fault_ended.
func (f Fault) Began(agent int, target string, dur time.Duration) history.Event {
	return history.NewFault(string(f), agent, target, dur)
}

// RestartBegan is the fault_began of a coordinator restart: an instant,
// whose Detail says whether the counter is kept. The runner records the
// coordinator's new incarnation after it (coordinator_restarted).
func RestartBegan(persist bool) history.Event {
	e := FaultRestart.Began(-1, history.TargetCoordinator, 0)
	e.Detail = "fence counter lost"
	if persist {
		e.Detail = "fence counter kept"
	}
	return e
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

// Field is the scenario file's key that asks for f.
func (f Fault) Field() string {
	switch f {
	case FaultPartition:
		return "partitions"
	case FaultRestart:
		return "restarts"
	case FaultCrash:
		return "crashes"
	case FaultPartitionMember, FaultPauseMember, FaultPauseLeader:
		return "etcd.faults"
	case FaultDrop:
		return "network"
	case FaultPush:
		return "push"
	case FaultPausePrimary, FaultKillPrimary, FaultPartitionPrimary:
		return "redis.faults"
	}
	return ""
}

// Has reports whether s asks for fault f.
func (s *Scenario) Has(f Fault) bool {
	switch f {
	case FaultPartition:
		return len(s.Partitions) > 0
	case FaultRestart:
		return len(s.Restarts) > 0
	case FaultCrash:
		return len(s.Crashes) > 0
	case FaultPartitionMember, FaultPauseMember, FaultPauseLeader:
		for _, m := range s.Etcd.Faults {
			if m.Do == f {
				return true
			}
		}
		return false
	case FaultDrop:
		n := s.Network
		return n.DropRequests > 0 || n.DropReplies > 0 || n.Duplicate > 0
	case FaultPush:
		return s.Push.Enabled
	case FaultPausePrimary, FaultKillPrimary, FaultPartitionPrimary:
		for _, r := range s.Redis.Faults {
			if r.Do == f {
				return true
			}
		}
		return false
	}
	return false
}

// respelled is the fault kind name spells with dashes for underscores
// (an older spelling of the member faults, "partition-member"), if it is
// one.
func respelled(name Fault) (Fault, bool) {
	f := Fault(strings.ReplaceAll(string(name), "-", "_"))
	for _, k := range Faults {
		if k == f && f != name {
			return f, true
		}
	}
	return "", false
}
