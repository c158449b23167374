package harness

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
	// Naive agents use the design note's "four lines": expiresAt = reply
	// arrival + TTL, check now < expiresAt, then write straight to the
	// resource.
	Naive Mode = "naive"
)

// Kind is the type of a simulation event.
type Kind uint8

// The events a simulation reports. Agent and Resource are -1 where they do
// not apply.
const (
	RequestSent       Kind = iota + 1 // Request: which; Token for renew/release
	RequestDropped                    // lost on the way to the coordinator (or partitioned)
	ReplyDropped                      // lost on the way back
	RequestDuplicated                 // delivered twice
	RequestRetried                    // an acquire resent with the same request id
	Acquired                          // the agent completed an acquire: Fence, Deadline (true time it believes until)
	Denied                            // acquire refused: Reason, Other (HeldBy), Dur (RetryAfter)
	Renewed                           // renewal completed: Fence, Deadline
	RenewRefused                      // Reason
	Expired                           // the coordinator's lease expired unrenewed, at this true instant
	Released                          // the coordinator released the lease
	CheckPassed                       // the agent's validity check passed
	CheckFailed                       // the check failed: the agent gives the lease up
	StallBegan                        // Dur: how long
	StallEnded
	CommitAdmitted       // fenced: the gate admitted the write and it landed; naive: the write landed
	CommitRefused        // fenced: the gate refused: Other/OtherFence is the floor
	AdmitPushed          // the coordinator's push reached the gate: Fence, Other/OtherFence is the floor after
	PushDropped          // the push was lost
	CoordinatorRestarted // Fence: the fence it resumes after; Persist in Reason ("persisted"/"lost")
	PartitionBegan
	PartitionEnded
	Intervened     // a live intervention: Intervention
	ReleaseRefused // the coordinator refused a release: Reason (the lease had expired, or was superseded)
	numKinds
)

var kindNames = [numKinds]string{
	RequestSent: "request-sent", RequestDropped: "request-dropped", ReplyDropped: "reply-dropped",
	RequestDuplicated: "request-duplicated", RequestRetried: "request-retried",
	Acquired: "acquired", Denied: "denied", Renewed: "renewed", RenewRefused: "renew-refused",
	Expired: "expired", Released: "released", CheckPassed: "check-passed", CheckFailed: "check-failed",
	StallBegan: "stall-began", StallEnded: "stall-ended", CommitAdmitted: "commit-admitted",
	CommitRefused: "commit-refused", AdmitPushed: "admit-pushed", PushDropped: "push-dropped",
	CoordinatorRestarted: "coordinator-restarted", PartitionBegan: "partition-began",
	PartitionEnded: "partition-ended", Intervened: "intervened", ReleaseRefused: "release-refused",
}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one step of a simulation, at true (virtual) time At. It is a
// plain value: subscribers may keep it.
type Event struct {
	Seq      uint64        // 1, 2, 3, ... per simulation
	At       time.Duration // true time since the run began
	Mode     Mode
	Kind     Kind
	Agent    int // index of the agent (AgentName), or -1
	Resource int // index of the resource (ResourceName), or -1
	Fence    leasefence.Fence
	// Other and OtherFence name a second party: the floor's holder for a
	// refusal, the current holder for a denial. Other is -1 when none.
	Other      int
	OtherFence leasefence.Fence
	Request    leasefence.RequestKind // RequestSent and friends: acquire, renew, or "release"
	RequestID  string
	Reason     leasefence.Reason
	// Dur is a duration the event carries: a stall's length, a denial's
	// retry hint, the network delay of a sent message.
	Dur time.Duration
	// Deadline is, for Acquired and Renewed, the true instant until which
	// the agent now believes it holds the lease; for Expired the lease's
	// coordinator expiry.
	Deadline     time.Duration
	Intervention *Intervention // Intervened only
}

// KindRelease marks a release request in Event.Request.
const KindRelease leasefence.RequestKind = "release"

// Subscriber receives every event of a simulation, synchronously, on the
// simulation's goroutine, in order. It must not call back into the
// simulation. A slow subscriber slows the run but never changes its outcome;
// a consumer that must never slow it (a dashboard) should read Snapshots or
// use a Feed.
type Subscriber interface {
	Event(Event)
}

// SubscriberFunc adapts a function to Subscriber.
type SubscriberFunc func(Event)

// Event calls f(e).
func (f SubscriberFunc) Event(e Event) { f(e) }
