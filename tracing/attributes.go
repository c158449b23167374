package tracing

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/leasefence/lab/leasefence/leaseotel"
)

// Attribute keys of simulated runs, beside the library's own
// (leaseotel's LeaseResource, FenceOutcome, ...).
const (
	SimScenario = attribute.Key("sim.scenario") // string: the scenario's name
	SimSeed     = attribute.Key("sim.seed")     // string: the scenario's seed, in decimal (a uint64 does not fit an int attribute)
	SimMode     = attribute.Key("sim.mode")     // string: the contender's name: "fenced", "naive", "redsync", ...
	// SimContenderLibrary, SimContenderVersion and SimDiscipline say, on
	// the roots of a library contender's leases, which lock ran (its Go
	// module and version) and how its holders wrote ("naive" or "fenced").
	SimContenderLibrary = attribute.Key("sim.contender.library")
	SimContenderVersion = attribute.Key("sim.contender.version")
	SimDiscipline       = attribute.Key("sim.contender.discipline")
	SimAgent            = attribute.Key("sim.agent") // string: the simulated agent holding the lease
	// SimEpoch is the coordinator incarnation that minted a lease (int, from
	// 0; each restart adds one): without persistence a restarted
	// coordinator mints the same fences again.
	SimEpoch    = attribute.Key("sim.coordinator_epoch")
	SimDuration = attribute.Key("sim.duration_ms") // int: a stall's length, in milliseconds
	// SimFault and SimFaultTarget, on a fault's span events: its kind, as
	// a scenario spells it ("partition", "pause_leader"), and what it
	// befell (an agent, "coordinator", "etcd member 2").
	SimFault       = attribute.Key("sim.fault")
	SimFaultTarget = attribute.Key("sim.fault_target")
)

// Names of span events.
const (
	EventRequestDropped    = "request dropped"
	EventReplyDropped      = "reply dropped"
	EventRequestDuplicated = "request duplicated"
	EventRequestRetried    = "request retried"
	// EventAcquireDenied, on a "lease" span, stands for the acquires of one
	// requester refused because that lease was held (LeaseRequester,
	// LeaseReason, LeaseRetryAfter of the first, LeaseDenials, LeaseDeniedFor),
	// at the first refusal's reply.
	EventAcquireDenied = "acquire denied"
	EventCheckPassed   = "check passed"
	EventCheckFailed   = "check failed"
	EventWriteSkipped  = "write skipped" // a scripted write with no valid check before it
	// EventWriteFailed, on a "lease" span: the store failed a write (a
	// timeout, a lost connection), with its error in ErrorMessage; whether
	// it landed is in the resource's record.
	EventWriteFailed = "write failed"
	EventStallBegan  = "stall began"
	EventStallEnded  = "stall ended"
	EventExpired     = "expired at the coordinator"
	EventReleased    = "released at the coordinator"
	EventAdmitPushed = "admit pushed"
	EventPushDropped = "push dropped"
	EventRestarted   = "coordinator restarted" // the lease was forgotten
	// EventFaultBegan and EventFaultEnded, with SimFault and
	// SimFaultTarget: a fault of an agent (a partition, a crash) on the
	// lease it holds; a fault of no agent (an etcd member's, a restart)
	// on every lease the coordinator has not let go.
	EventFaultBegan = "fault began"
	EventFaultEnded = "fault ended"

	// An act of a simulated run that took no time (an acquire answered at
	// the instant it was sent, a write at the instant of its check) is a
	// span event of its name on the "lease" span, with the attributes the
	// span would have had: a span of no length is one a tracing backend
	// has to repair.
	EventLeaseAcquire = leaseotel.SpanLeaseAcquire
	EventFenceCommit  = leaseotel.SpanFenceCommit
)
