package leasefence

// Observation hooks, in the spirit of net/http/httptrace: a struct of
// optional functions per component. A nil hook struct, or a nil field, costs
// one nil check and nothing else. Hooks run synchronously on the caller's
// goroutine, after the step they describe has taken effect and outside every
// lock of the library, so a hook may call back into the component (Floor,
// Rejections, IssuedFence) but it delays the caller while it runs: keep hooks
// fast and never block in them. A hook must not retain pointers it is given
// beyond the call; the values it receives are copies it may keep.

// CoordinatorTrace observes a Coordinator. Set it in CoordinatorOptions.Trace.
type CoordinatorTrace struct {
	// Acquire reports every Acquire answered with an outcome.
	Acquire func(AcquireInfo)
	// Renew reports every Renew answered with an outcome.
	Renew func(RenewInfo)
	// Release reports every Release answered with an outcome.
	Release func(ReleaseInfo)
}

// AcquireInfo describes one answered Acquire.
type AcquireInfo struct {
	Request AcquireRequest
	Outcome AcquireOutcome
	// Replayed is true when the outcome repeats the grant already made to
	// the same request id (a client retry): no fence was minted.
	Replayed bool
	At       Instant // the coordinator's reading the answer is dated from
}

// RenewInfo describes one answered Renew.
type RenewInfo struct {
	Request RenewRequest
	Outcome RenewOutcome
	At      Instant
}

// ReleaseInfo describes one answered Release.
type ReleaseInfo struct {
	Token   Token
	Outcome ReleaseOutcome
	At      Instant
}

// ClientTrace observes a Client. Set it in ClientOptions.Trace.
type ClientTrace struct {
	// Begin reports a request stamped and recorded by BeginAcquire or
	// BeginRenewal.
	Begin func(BeginInfo)
	// Complete reports every call to CompleteAcquire or CompleteRenewal,
	// successful or not.
	Complete func(CompleteInfo)
}

// RequestKind tells an acquire from a renewal.
type RequestKind string

// The kinds of request a client makes.
const (
	KindAcquire RequestKind = "acquire"
	KindRenew   RequestKind = "renew"
)

// BeginInfo describes a request the client has just stamped.
type BeginInfo struct {
	Kind      RequestKind
	RequestID string
	Token     Token   // for a renewal, the lease's token; for an acquire, holder and resource only
	SentAt    Instant // the client's own reading, which will anchor the deadline
}

// CompleteInfo describes one completion attempt.
type CompleteInfo struct {
	Kind      RequestKind
	RequestID string
	Grant     Grant
	Lease     Lease // the lease made, when Err is nil
	Err       error
}

// GateTrace observes a FenceGate. Set it with WithGateTrace.
type GateTrace struct {
	// Commit reports every Commit that reached a decision: admitted (after
	// the write returned, or panicked) or refused. A Commit that returned
	// ctx.Err() before deciding, or ErrWrongResource, is not reported. It
	// runs after the Commit has given the gate up, so it may commit to the
	// gate itself and holds up no other writer. For a nested Commit it runs
	// after the Commit has let its enclosing write know it is done: the
	// enclosing write may still be running (and holding the gate), or, for
	// a Commit from a goroutine the write did not wait for, may already
	// have returned.
	Commit func(CommitInfo)
	// Admit reports every Admit that was not ErrWrongResource.
	Admit func(AdmitInfo)
}

// CommitInfo describes one decided Commit.
type CommitInfo struct {
	Token    Token
	Admitted bool
	// Nested is true for a Commit made from inside a write callback of the
	// same gate and handled in place.
	Nested bool
	// Floor is the floor the token was judged against.
	Floor Token
	// Rejection is the logged refusal when Admitted is false.
	Rejection Rejection
	// Err is the refusal, or the write's error, or nil.
	Err error
	// Panicked is true when the write callback panicked.
	Panicked bool
	// Start and End are readings of the gate's clock (WithGateClock) when
	// Commit was called and when it returned; zero Instants without one.
	Start, End Instant
}

// AdmitInfo describes one Admit.
type AdmitInfo struct {
	Token Token
	// Raised is true when the floor moved to Token.
	Raised bool
	Floor  Token // the floor after the Admit
	Err    error
	At     Instant // the gate clock's reading; zero without one
}

// SessionTrace observes the sessions of Hold and TryHold. Set it in
// HoldOptions.Trace.
type SessionTrace struct {
	// End reports, once, that a session ended: lost or released. It runs on
	// whichever goroutine noticed the end (the renewing one, or a caller of
	// Lost, Err, Context, Remaining or Release).
	End func(SessionEndInfo)
}

// SessionEndReason says in one word why a session ended.
type SessionEndReason string

// Why a session ends.
const (
	// SessionReleased: its holder called Release.
	SessionReleased SessionEndReason = "released"
	// SessionExpired: the holder's send-anchored deadline passed unrenewed
	// (renewals lost or late, or the whole process stalled).
	SessionExpired SessionEndReason = "expired"
	// SessionRefused: the coordinator refused a renewal (the lease had
	// already expired there, or been superseded or released).
	SessionRefused SessionEndReason = "refused"
	// SessionFailed: a renewal could not be sent or checked, or the
	// client's clock failed.
	SessionFailed SessionEndReason = "failed"
)

// SessionEndInfo describes the end of a session.
type SessionEndInfo struct {
	Token  Token
	Reason SessionEndReason
	Err    error // the session's Err: matches ErrLeaseLost, and ErrReleased after Release
}
