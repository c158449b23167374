package history

import (
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Mode is how agents write to the resource.
type Mode string

// The two modes. A run can do both on the same fault schedule.
const (
	// Fenced agents write through FenceGate.Commit with their lease's token.
	Fenced Mode = "fenced"
	// Naive agents take a lease the way most lock clients do: expiresAt =
	// reply arrival + TTL, check now < expiresAt, then write straight to
	// the resource.
	Naive Mode = "naive"
)

// Kind is the type of an event. Its String is the snake_case name the
// history file uses.
type Kind uint8

// The events of a history. Agent and Resource are -1 where they do not
// apply. Every event that concerns a lease carries its generation:
// Incarnation (the coordinator's), Resource and Fence.
const (
	// RequestSent: an agent sent Request (RequestID; Fence for a renewal
	// or release); Dur is the network delay it was given.
	RequestSent Kind = iota + 1
	// RequestDropped: the request was lost on the way to the coordinator
	// (or the agent was partitioned).
	RequestDropped
	// ReplyDropped: the coordinator's reply was lost on the way back.
	ReplyDropped
	// RequestDuplicated: the request is delivered a second time, Dur after
	// it was sent.
	RequestDuplicated
	// RequestRetried: an acquire was resent under the same request id.
	RequestRetried
	// AcquireAbandoned: the agent gave up its acquire (Outcome says why: no
	// reply came in time, or it was denied and will not try again); a
	// reply that comes later is ignored.
	AcquireAbandoned
	// Granted: the coordinator minted a lease generation for Agent
	// (Incarnation, Resource, Fence); Deadline is its coordinator expiry,
	// in true time. A retried acquire answered from the replay cache
	// mints nothing and has no Granted.
	Granted
	// Acquired: the agent completed an acquire of generation
	// (Incarnation, Resource, Fence); Deadline is the true instant until
	// which it believes it holds the lease.
	Acquired
	// Denied: the coordinator refused an acquire: Reason, Other (the
	// holder), Dur (its retry hint).
	Denied
	// Renewed: the agent completed a renewal; Deadline is its new belief.
	Renewed
	// Extended: the coordinator extended the generation; Deadline is its
	// new coordinator expiry, in true time.
	Extended
	// RenewRefused: the coordinator refused a renewal, with Reason.
	RenewRefused
	// Expired: the coordinator's lease expired unrenewed; Deadline is the
	// expiry instant.
	Expired
	// Released: the coordinator released the generation.
	Released
	// ReleaseRefused: the coordinator refused a release, with Reason.
	ReleaseRefused
	// CheckPassed: the agent's validity check passed.
	CheckPassed
	// CheckFailed: the agent's validity check failed.
	CheckFailed
	// WriteSkipped: a scripted write was not attempted: the agent held no
	// lease, or its last check had not passed.
	WriteSkipped
	// StallBegan: the agent stalls for Dur.
	StallBegan
	// StallEnded: the agent's stall is over.
	StallEnded
	// CommitAdmitted: fenced mode; the gate admitted the write under Fence
	// and it landed.
	CommitAdmitted
	// CommitRefused: fenced mode; the gate refused the write and logged
	// it (Outcome OutcomeRefusalNotLogged: and could not log it;
	// OutcomeLeaseNotLive: for the writer's lease, which was not live,
	// not its fence). Other and OtherFence are the floor it was refused
	// by, or for a lease's refusal the floor that admitted its fence.
	CommitRefused
	// WriteLanded: naive mode; the write landed at the resource with no
	// gate in between.
	WriteLanded
	// LeaseAbandoned: the agent stopped believing it holds the generation
	// (Outcome says why). It no longer writes under it.
	LeaseAbandoned
	// AdmitPushed: the coordinator's push of a new fence reached the gate;
	// Other and OtherFence are the floor after it; Outcome is
	// OutcomeBelowFloor when the gate already had a higher floor.
	AdmitPushed
	// PushDropped: the push of a new fence to the gate was lost.
	PushDropped
	// CoordinatorRestarted: a new coordinator incarnation (Incarnation)
	// starts, resuming after Fence; Outcome says whether it kept its
	// fence counter. Every lease of the old incarnation is forgotten.
	CoordinatorRestarted
	// FaultBegan: the run played a fault (Fault: its kind, one of
	// spec.Faults) on Agent, or on Target where it befalls no agent (the
	// coordinator, an etcd member). Dur is how long it is to last: a
	// FaultEnded of the same kind and target follows at its end, unless
	// the run ends first. An instant (Dur 0: a coordinator restart) has
	// no FaultEnded. Detail says how, where the kind has variants (a
	// delay instead of a cut), or, with Outcome OutcomeNotPlayed, why the
	// run could not play it (then no FaultEnded follows either).
	FaultBegan
	// FaultEnded: the fault of kind Fault on Agent or Target is over.
	FaultEnded
	// Intervened: a live intervention (Intervention) was applied.
	Intervened
	// LibraryError: the library under test returned an error it never
	// should (Detail says which call and what); the run ends here.
	LibraryError
	// ForgeryRefused: the resource refused a write under a proof a forger
	// made up (Outcome: the forgery; Detail: the forger and the answer it
	// got). A forger names no agent: it holds no lease.
	ForgeryRefused
	// ForgeryLanded: a forger's write landed at the resource (Fence: the
	// fence it claimed; Outcome and Detail as for ForgeryRefused). In the
	// fenced mode that is a violation.
	ForgeryLanded
	// WriteFailed: the store failed the agent's write (Detail: the call and
	// its error, a timeout or a connection lost): the agent cannot know
	// whether it landed, and gives up its lease. Whether it landed is the
	// resource's own record's to say, as for every write.
	WriteFailed
	numKinds
)

var kindNames = [numKinds]string{
	RequestSent: "request_sent", RequestDropped: "request_dropped", ReplyDropped: "reply_dropped",
	RequestDuplicated: "request_duplicated", RequestRetried: "request_retried",
	AcquireAbandoned: "acquire_abandoned", Granted: "granted", Acquired: "acquired", Denied: "denied",
	Renewed: "renewed", Extended: "extended", RenewRefused: "renew_refused", Expired: "expired",
	Released: "released", ReleaseRefused: "release_refused", CheckPassed: "check_passed",
	CheckFailed: "check_failed", WriteSkipped: "write_skipped", StallBegan: "stall_began",
	StallEnded: "stall_ended", CommitAdmitted: "commit_admitted", CommitRefused: "commit_refused",
	WriteLanded: "write_landed", LeaseAbandoned: "lease_abandoned", AdmitPushed: "admit_pushed",
	PushDropped: "push_dropped", CoordinatorRestarted: "coordinator_restarted",
	FaultBegan: "fault_began", FaultEnded: "fault_ended", Intervened: "intervened", LibraryError: "library_error",
	ForgeryRefused: "forgery_refused", ForgeryLanded: "forgery_landed", WriteFailed: "write_failed",
}

// Kinds returns every event kind, in order.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := Kind(1); k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// ParseKind maps a kind's name back to the Kind.
func ParseKind(name string) (Kind, bool) {
	for k := Kind(1); k < numKinds; k++ {
		if kindNames[k] == name {
			return k, true
		}
	}
	return 0, false
}

// NamesAgent reports whether every event of kind k names the agent it
// concerns. Only a coordinator restart, a fault, a live intervention, a
// library error and a forger's write may name none.
func (k Kind) NamesAgent() bool {
	switch k {
	case CoordinatorRestarted, FaultBegan, FaultEnded, Intervened, LibraryError, ForgeryRefused, ForgeryLanded:
		return false
	}
	return k > 0 && k < numKinds
}

// NamesResource reports whether every event of kind k names the resource
// it concerns. Besides the kinds that need no agent (a fault among them:
// a partition or a crash concerns an agent only), a check, a stall or a
// skipped write may befall an agent that holds nothing (a scripted one).
func (k Kind) NamesResource() bool {
	switch k {
	case CheckPassed, CheckFailed, StallBegan, StallEnded, WriteSkipped:
		return false
	case ForgeryRefused, ForgeryLanded:
		return true
	}
	return k.NamesAgent()
}

// IsWrite reports whether k is a write attempt at a resource.
func (k Kind) IsWrite() bool { return k == CommitAdmitted || k == CommitRefused || k == WriteLanded }

// Request is the kind of message an agent sends the coordinator.
type Request string

// The requests.
const (
	RequestAcquire Request = "acquire"
	RequestRenew   Request = "renew"
	RequestRelease Request = "release"
)

// Outcome is the history's own word on why something happened, where the
// coordinator gives no leasefence.Reason.
type Outcome string

// The outcomes.
const (
	// OutcomeNoReply: an acquire was abandoned because no reply came in
	// time and no retry was left.
	OutcomeNoReply Outcome = "no_reply"
	// OutcomeDenied: an acquire was abandoned after the coordinator denied
	// it, by an agent that will not try again.
	OutcomeDenied Outcome = "denied"
	// OutcomeCheckFailed: the lease was abandoned after a failed check.
	OutcomeCheckFailed Outcome = "check_failed"
	// OutcomeCommitRefused: the lease was abandoned after the gate refused
	// its write.
	OutcomeCommitRefused Outcome = "commit_refused"
	// OutcomeWriteFailed: the lease was abandoned after the store failed
	// its write.
	OutcomeWriteFailed Outcome = "write_failed"
	// OutcomeRefusalNotLogged: on a refusal, the gate refused the write
	// but could not log the refusal (leasefence.ErrRefusalNotLogged).
	OutcomeRefusalNotLogged Outcome = "refusal_not_logged"
	// OutcomeLeaseNotLive: on a refusal, a gate that checks the writer's
	// lease too (sqlgate.WithCurrentLease) refused the write because its
	// lease was not the resource's current, live one, though the floor
	// it names admits the fence.
	OutcomeLeaseNotLive Outcome = "lease_not_live"
	// OutcomeLeaseNotLiveNotLogged: such a refusal that the gate could
	// not log.
	OutcomeLeaseNotLiveNotLogged Outcome = "lease_not_live_not_logged"
	// OutcomeRenewRefused: the lease was abandoned after the coordinator
	// refused its renewal.
	OutcomeRenewRefused Outcome = "renew_refused"
	// OutcomeDone: the lease was abandoned after its last write.
	OutcomeDone Outcome = "done"
	// OutcomeReleased: the lease was abandoned as its release was sent.
	OutcomeReleased Outcome = "released"
	// OutcomeBelowFloor: a pushed fence was below the gate's floor.
	OutcomeBelowFloor Outcome = "below_floor"
	// OutcomeCounterPersisted: a restarted coordinator kept its fence
	// counter.
	OutcomeCounterPersisted Outcome = "counter_persisted"
	// OutcomeCounterLost: a restarted coordinator started its fences from
	// zero again.
	OutcomeCounterLost Outcome = "counter_lost"
	// OutcomeNotPlayed: the run could not play a fault (Detail says why).
	OutcomeNotPlayed Outcome = "not_played"
	// OutcomeFailedOver: a fault ended (its fault_ended) after the
	// coordinator's store failed over to a replica, which may lack what
	// the old primary acknowledged: fences minted since the fault began
	// may reissue fences minted before.
	OutcomeFailedOver Outcome = "failed_over"
)

// LeaseNotLive reports whether o, a refusal's, says the gate refused the
// write's lease rather than its fence.
func (o Outcome) LeaseNotLive() bool {
	return o == OutcomeLeaseNotLive || o == OutcomeLeaseNotLiveNotLogged
}

// NotLogged reports whether o, a refusal's, says the gate could not log
// the refusal.
func (o Outcome) NotLogged() bool {
	return o == OutcomeRefusalNotLogged || o == OutcomeLeaseNotLiveNotLogged
}

// IsFault reports whether k is one of the fault pair, FaultBegan or
// FaultEnded: the one place a consumer of events handles faults.
func (k Kind) IsFault() bool { return k == FaultBegan || k == FaultEnded }

// Instant reports whether e, a FaultBegan, is a fault of an instant (or
// one not played): no FaultEnded follows it.
func (e *Event) Instant() bool {
	return e.Kind == FaultBegan && (e.Dur == 0 || e.Outcome == OutcomeNotPlayed)
}

// TargetCoordinator is the Target of a fault of the coordinator (a
// restart).
const TargetCoordinator = "coordinator"

// NewFault is the FaultBegan of a fault of kind (as spec.Faults spells it)
// on agent (-1 for none) or else target, to last dur (0: an instant).
func NewFault(kind string, agent int, target string, dur time.Duration) Event {
	if agent >= 0 {
		target = ""
	}
	return Event{Kind: FaultBegan, Fault: kind, Agent: agent, Resource: -1, Other: -1, Target: target, Dur: dur}
}

// Ended is the FaultEnded of the fault e, a FaultBegan, began.
func (e Event) Ended() Event {
	return Event{Kind: FaultEnded, Fault: e.Fault, Agent: e.Agent, Resource: -1, Other: -1, Target: e.Target}
}

// Same reports whether e and f, fault events, are of the same fault: its
// kind on the same agent or target. A FaultEnded ends the latest
// FaultBegan that is the Same and lasts.
func (e *Event) Same(f *Event) bool {
	return e.Fault == f.Fault && e.Agent == f.Agent && e.Target == f.Target
}

// InterventionKind is a live intervention in a paced run.
type InterventionKind string

// The live interventions.
const (
	// StallAgent pauses agent Agent for Duration from now, as a GC pause
	// would: whatever it was about to do happens that much later. A write
	// whose check already passed still lands after the pause (the gap); an
	// agent paused between writes checks its lease again afterwards.
	StallAgent InterventionKind = "stall-agent"
	// SetDropRate sets both drop probabilities to Value.
	SetDropRate InterventionKind = "set-drop-rate"
	// RestartCoordinator restarts the coordinator (Persist keeps the fence
	// counter).
	RestartCoordinator InterventionKind = "restart-coordinator"
	// TogglePush turns the gate push on or off.
	TogglePush InterventionKind = "toggle-push"
)

// Intervention is a live change to a running simulation, applied at virtual
// instant At. Interventions are recorded, so a steered run replays.
type Intervention struct {
	At       time.Duration    `json:"at"`
	Kind     InterventionKind `json:"kind"`
	Agent    string           `json:"agent,omitempty"`
	Duration time.Duration    `json:"duration,omitempty"`
	Value    float64          `json:"value,omitempty"`
	Persist  bool             `json:"persist,omitempty"`
}

// Event is one step of a history, at true time At. It is a plain value:
// subscribers may keep it. Agents and resources are indices into the
// Header's names.
type Event struct {
	Seq      uint64        // 1, 2, 3, ... per mode
	At       time.Duration // true time since the run began
	Mode     Mode
	Kind     Kind
	Agent    int // index into Header.Agents, or -1
	Resource int // index into Header.Resources, or -1
	Fence    leasefence.Fence
	// Incarnation is the coordinator incarnation (from 0) of the lease
	// generation the event concerns, or of a restarted coordinator.
	Incarnation int32
	// Other and OtherFence name a second party: the floor's holder for a
	// refusal, the current holder for a denial. Other is -1 when none.
	Other      int
	OtherFence leasefence.Fence
	Request    Request // RequestSent and the message events
	RequestID  string
	// Reason is the coordinator's reason for a refusal (Denied,
	// RenewRefused, ReleaseRefused).
	Reason leasefence.Reason
	// Outcome is the history's reason, where the coordinator gave none.
	Outcome Outcome
	// Dur is a duration the event carries: a stall's length, a denial's
	// retry hint, the network delay of a sent message.
	Dur time.Duration
	// Deadline is, for Acquired and Renewed, the true instant until which
	// the agent now believes it holds the lease; for Granted, Extended and
	// Expired the lease's coordinator expiry.
	Deadline     time.Duration
	Intervention *Intervention // Intervened only
	// Fault is a fault event's kind (FaultBegan, FaultEnded), as
	// spec.Faults spells it: "partition", "restart", "pause_leader".
	Fault string
	// Target is what a fault befalls when it befalls no agent:
	// "coordinator", "etcd member 2", "etcd member 1 (the leader)".
	Target string
	// Detail is free text: what went wrong, for LibraryError and
	// WriteFailed; how a fault was played, or why it was not.
	Detail string
}
