package leaseotel

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Span names. They are low-cardinality on purpose: which resource, holder
// and fence a span is about goes in attributes, never in the name.
const (
	SpanLease        = "lease"         // one lease generation, acquire to end (traces made from a lab run's history)
	SpanLeaseAcquire = "lease acquire" // an acquire: send to reply
	SpanLeaseRenew   = "lease renew"   // a renewal: send to reply
	SpanLeaseRelease = "lease release" // a release: send to the coordinator's answer
	// SpanFenceCommit is a write through a FenceGate, admitted or refused.
	// In a simulated run it lasts from the holder's validity check to the
	// gate's answer: the check-to-write window a stall stretches.
	SpanFenceCommit = "fence commit"
	SpanFenceAdmit  = "fence admit" // the coordinator's push of a new fence to a gate
)

// Attribute keys on spans, span events and links.
const (
	LeaseResource   = attribute.Key("lease.resource")       // string: the resource the lease is for
	LeaseHolder     = attribute.Key("lease.holder")         // string: the holder (or requester)
	LeaseFence      = attribute.Key("lease.fence")          // int: the lease's fence
	LeaseTTL        = attribute.Key("lease.ttl_ms")         // int: the TTL granted, in milliseconds
	LeaseRequestID  = attribute.Key("lease.request_id")     // string: the request id of an acquire or renewal
	LeaseOutcome    = attribute.Key("lease.outcome")        // string: see the Outcome constants
	LeaseReason     = attribute.Key("lease.reason")         // string: the coordinator's leasefence.Reason
	LeaseHeldBy     = attribute.Key("lease.held_by")        // string: who holds it, on a denial
	LeaseRetryAfter = attribute.Key("lease.retry_after_ms") // int: the denial's retry hint, in milliseconds
	LeaseReplayed   = attribute.Key("lease.replayed")       // bool: an acquire answered with the grant already made
	LeaseRequester  = attribute.Key("lease.requester")      // string: on an "acquire denied" event, the agent refused
	LeaseDenials    = attribute.Key("lease.denials")        // int: on an "acquire denied" event, how many acquires of the requester were refused
	// LeaseDeniedFor is, on an "acquire denied" event that stands for more
	// than one refusal, the time from the first to the last (int,
	// milliseconds): how long the requester waited behind this lease.
	LeaseDeniedFor = attribute.Key("lease.denied_for_ms")
	// LeaseBelievedFor is, on a simulated acquire or renewal that succeeded,
	// how long after the reply its holder believes the lease lasts (int,
	// milliseconds): the client's deadline in fenced mode, reply + TTL in
	// naive mode. Compare it with the coordinator's expiry event.
	LeaseBelievedFor = attribute.Key("lease.believed_for_ms")

	FenceFloor       = attribute.Key("fence.floor")        // int: the floor's fence the token was judged against (after, for an admit)
	FenceFloorHolder = attribute.Key("fence.floor_holder") // string: who raised that floor
	FenceOutcome     = attribute.Key("fence.outcome")      // string: see the Outcome constants
	FenceNested      = attribute.Key("fence.nested")       // bool: a Commit made from inside a write callback

	// ErrorType is the semantic-convention error.type, on every span whose
	// status is Error: one of the Error constants below, the name of the
	// leasefence sentinel the error matches (grant_mismatch,
	// unknown_request, ...), or the Go type of any other error.
	ErrorType = semconv.ErrorTypeKey
	// ErrorMessage is the semantic-convention exception.message: the text
	// of an error the lab did not make, a store's (EventWriteFailed).
	ErrorMessage = semconv.ExceptionMessageKey
)

// Values of LeaseOutcome and FenceOutcome.
const (
	OutcomeGranted    = "granted"     // acquire: a lease
	OutcomeDenied     = "denied"      // acquire: held by someone else (LeaseReason says why)
	OutcomeRenewed    = "renewed"     // renewal: extended, same fence
	OutcomeRefused    = "refused"     // renewal or release refused (LeaseReason), or a commit refused by the gate
	OutcomeReleased   = "released"    // release: the lease is free
	OutcomeNoReply    = "no-reply"    // every copy of the request or its reply was lost; the requester gave up
	OutcomeUnanswered = "unanswered"  // still waiting when the run ended, or abandoned by its holder
	OutcomeAdmitted   = "admitted"    // commit: the write landed
	OutcomeStale      = "stale"       // naive commit: landed below a newer holder's write, with no error anywhere
	OutcomeRaised     = "raised"      // admit: the floor moved to the pushed fence
	OutcomeBelowFloor = "below-floor" // admit: a fence below the floor, which changes nothing
	OutcomeUnchanged  = "unchanged"   // admit: the floor already was that token
)

// Values of ErrorType.
const (
	ErrorStaleFence    = "stale_fence"    // a commit refused: its fence is below the floor
	ErrorTokenConflict = "token_conflict" // a commit refused: the floor's fence under another holder
	ErrorNoReply       = "no_reply"       // a request never answered
	ErrorLeaseLost     = "lease_lost"     // a renewal refused: the lease is gone
	ErrorWritePanicked = "write_panicked" // an admitted write whose callback panicked
)
