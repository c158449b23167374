package spec

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasefence/lab/history"
)

// Fault is a kind of fault a scenario can put a run through. Faults is
// the one list of them, each spelled one way: the scenario file's words
// (the faults list's do), a history's fault events (their fault field),
// what a runner plays (package registry says, per backend, store and
// driver, which kinds it plays), and what a scenario asks for (Has).
//
// A fault played at an instant or over a span is recorded in the history
// as a fault_began event, and a fault_ended when a span ends (history's
// FaultBegan and FaultEnded, which carry the kind and its target). Drops
// and the push are played message by message over the whole run: their
// record is each message's own event (request_dropped, reply_dropped,
// request_duplicated, push_dropped).
//
// The faults of a backend's own servers (its members, its primary) are
// one list, the scenario's faults (TimedFault), whatever the backend: a
// backend's adapter plays the kinds its registry entry says it plays, and
// the runner schedules each entry alike. A kind of that list is stated
// here once, in timedKinds: what it aims at, and what of an entry it
// checks beyond the bounds every entry shares.
type Fault string

// The faults of the agents and the lab's coordinator, as scenario files,
// histories, refusals and listings name them; those of a backend's
// servers are beside their backend's settings (etcd.go, redis.go).
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
	// FaultDrop: messages between agents and coordinator dropped or
	// duplicated (network.drop_requests, drop_replies, duplicate).
	FaultDrop Fault = "drop"
	// FaultPush: the coordinator pushing each new fence to the gates, and
	// losing some of the pushes (push).
	FaultPush Fault = "push"
)

// Faults lists every fault kind.
var Faults = []Fault{FaultPartition, FaultRestart, FaultCrash, FaultPartitionMember, FaultPauseMember, FaultPauseLeader,
	FaultDrop, FaultPush, FaultPausePrimary, FaultKillPrimary, FaultPartitionPrimary, FaultKillConnections}

// PerMessage reports whether f is played message by message over the
// whole run (drops, the push): its record is each message's own event,
// not the fault pair.
func (f Fault) PerMessage() bool { return f == FaultDrop || f == FaultPush }

// Timed reports whether f is a kind of the faults list: a fault of a
// backend's servers, from an instant for a duration.
func (f Fault) Timed() bool {
	_, ok := timedKinds[f]
	return ok
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

// Field is the scenario file's key that asks for f.
func (f Fault) Field() string {
	switch f {
	case FaultPartition:
		return "partitions"
	case FaultRestart:
		return "restarts"
	case FaultCrash:
		return "crashes"
	case FaultDrop:
		return "network"
	case FaultPush:
		return "push"
	}
	if f.Timed() {
		return "faults"
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
	case FaultDrop:
		n := s.Network
		return n.DropRequests > 0 || n.DropReplies > 0 || n.Duplicate > 0
	case FaultPush:
		return s.Push.Enabled
	}
	for _, t := range s.Faults {
		if t.Do == f {
			return true
		}
	}
	return false
}

// hasAny reports whether s asks for any of kinds.
func (s *Scenario) hasAny(kinds []Fault) bool {
	for _, f := range kinds {
		if s.Has(f) {
			return true
		}
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

// TimedFault is one entry of a scenario's faults list: a fault of kind Do
// on a backend's own servers, from At for Duration. Member and Delay are
// what some kinds take (the etcd member faults): a kind checks that an
// entry gives what it takes and nothing else.
type TimedFault struct {
	At       time.Duration `json:"at"`
	Do       Fault         `json:"do"`
	Duration time.Duration `json:"duration"`
	// Member names a member, from 1 (partition_member: 0 is the leader
	// of the moment; pause_member).
	Member int `json:"member,omitempty"`
	// Delay, for partition_member, delays the member's traffic by this
	// much instead of cutting it.
	Delay time.Duration `json:"delay,omitempty"`
}

// Aim names what f strikes, as known before it begins ("etcd member 2",
// "etcd leader", "redis primary"): the target of a fault that could not
// begin, whose backend never said what it struck.
func (f TimedFault) Aim() string {
	if k, ok := timedKinds[f.Do]; ok {
		return k.aim(f)
	}
	return string(f.Do)
}

// timedKind is what spec knows of a kind of the faults list.
type timedKind struct {
	// aim: see TimedFault.Aim.
	aim func(f TimedFault) string
	// validate complains of what faults[i] asks that its kind cannot
	// play, beyond the bounds every entry shares (validateTimed).
	validate func(s *Scenario, i int, bad complaint)
}

// timedKinds are the kinds of the faults list. A new kind is a constant,
// its line here, and its backend's registry entry playing it.
var timedKinds = map[Fault]timedKind{
	FaultPartitionMember: memberKind, FaultPauseMember: memberKind, FaultPauseLeader: memberKind,
	FaultPausePrimary: primaryKind, FaultKillPrimary: primaryKind, FaultPartitionPrimary: primaryKind,
	FaultKillConnections: connectionsKind,
}

// TimedFaults lists the kinds of the faults list, in the order of Faults.
func TimedFaults() []Fault {
	return slices.DeleteFunc(slices.Clone(Faults), func(f Fault) bool { return !f.Timed() })
}

func faultField(i int) string { return fmt.Sprintf("faults[%d]", i) }

// validateTimed checks the faults list: the bounds every entry shares,
// then what its kind checks.
func (s *Scenario) validateTimed(bad complaint) {
	for i, f := range s.Faults {
		field := faultField(i)
		if f.At < 0 || f.At > s.Duration {
			bad(field+".at", "must be in [0, duration], got %v", f.At)
		}
		if f.Duration <= 0 || f.Duration > MaxDuration {
			bad(field+".duration", "must be in (0, %v], got %v", MaxDuration, f.Duration)
		}
		if f.Delay < 0 || f.Delay > MaxDuration {
			bad(field+".delay", "must be in [0, %v], got %v", MaxDuration, f.Delay)
		}
		k, ok := timedKinds[f.Do]
		if !ok {
			bad(field+".do", "%s", badTimedFault(f.Do))
			continue
		}
		k.validate(s, i, bad)
	}
}

// badTimedFault says why do is no kind of the faults list; an older
// spelling with dashes ("partition-member") is named as such, with its one
// spelling now.
func badTimedFault(do Fault) string {
	names := make([]string, 0, len(timedKinds))
	for _, f := range TimedFaults() {
		names = append(names, string(f))
	}
	last := len(names) - 1
	msg := fmt.Sprintf("must be %s or %s, got %q", strings.Join(names[:last], ", "), names[last], do)
	if f, ok := respelled(do); ok && f.Timed() {
		msg += fmt.Sprintf(" (the old spelling: fault kinds are spelled with underscores, write %s)", f)
	}
	return msg
}
