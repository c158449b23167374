package leasefence

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Each concrete error type below answers errors.Is for its
// sentinel; the other sentinels may come wrapped with context
// (fmt.Errorf("...: %w", ErrX)), so always match with errors.Is.
var (
	// ErrStaleFence: a token whose fence is below the gate's floor. The
	// concrete error is *StaleFenceError.
	ErrStaleFence = errors.New("leasefence: stale fence")
	// ErrClockDomain: two instants from different clocks (or a zero Instant)
	// were compared or subtracted. The concrete error is *ClockDomainError.
	ErrClockDomain = errors.New("leasefence: instants from different clock domains")
	// ErrClockBackwards: a clock source read lower than a reading it had
	// already handed out. The concrete error is *ClockError.
	ErrClockBackwards = errors.New("leasefence: clock stepped backwards")
	// ErrRequestUsed: a request was completed a second time.
	ErrRequestUsed = errors.New("leasefence: request already completed")
	// ErrUnknownRequest: a completion for a request this client has no record
	// of (never begun, evicted from the bounded record, or begun as the other
	// kind of request).
	ErrUnknownRequest = errors.New("leasefence: unknown request")
	// ErrGrantMismatch: a grant that does not answer the request it is
	// completed with (another request id, holder, resource or fence).
	ErrGrantMismatch = errors.New("leasefence: grant does not answer this request")
	// ErrWrongResource: a token for another resource was presented at a gate.
	ErrWrongResource = errors.New("leasefence: token is for another resource")
	// ErrTokenConflict: a token with the same fence as the floor but another
	// holder. Fences are unique per acquisition, so this is a forged or
	// corrupted token.
	ErrTokenConflict = errors.New("leasefence: same fence, different holder")
	// ErrInvalidRequest: a malformed call: a holder, resource or request id
	// that is empty, longer than MaxIDLen, not UTF-8 or with a control
	// character (an *IDError), a nil
	// lease, a token with fence 0.
	ErrInvalidRequest = errors.New("leasefence: invalid request")
	// ErrNoClock: HasExpired on a Lease that was not built by Complete*, so it
	// has no clock to read.
	ErrNoClock = errors.New("leasefence: lease has no clock")
	// ErrUninitialized: a method of a zero FenceGate, Coordinator or Client,
	// which has no resource, clock or holder; make them with NewFenceGate,
	// NewCoordinator and NewClient.
	ErrUninitialized = errors.New("leasefence: zero value; use the constructor")
	// ErrFencesExhausted: the coordinator has issued the highest Fence there
	// is and refuses to mint another, which would wrap to a fence already
	// superseded. Resume with a lower StartFence only on a resource whose
	// gates start afresh.
	ErrFencesExhausted = errors.New("leasefence: fences exhausted")
	// ErrOutOfRange: an instant that would fall outside the range of a
	// clock's offsets (int64 nanoseconds from its origin): a reading so far
	// from its clock's origin that adding a TTL overflows. The arithmetic
	// refuses rather than wrap into the past.
	ErrOutOfRange = errors.New("leasefence: instant out of range")
	// ErrRefusalNotLogged: a durable gate judged the write stale, so it did
	// not land, but could not append the refusal to its log (the store
	// failed, or ctx ended in between). The concrete error is
	// *RefusalNotLoggedError. It does not match ErrStaleFence or
	// ErrTokenConflict, which promise a logged refusal.
	ErrRefusalNotLogged = errors.New("leasefence: write refused, but the refusal was not logged")
)

// StaleFenceError is the refusal of a token whose fence is below the floor.
// A refused Commit logs the embedded Rejection at the gate; an Admit below the
// floor is not logged and carries Seq 0.
type StaleFenceError struct {
	Rejection
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("leasefence: stale fence at %q: %s@%d refused, floor is %s@%d",
		e.Resource, e.Holder, e.Fence, e.FloorHolder, e.FloorFence)
}

// Is reports whether target is ErrStaleFence.
func (e *StaleFenceError) Is(target error) bool { return target == ErrStaleFence }

// TokenConflictError is the refusal of a token that repeats the floor's
// fence under another holder: fences are unique per acquisition, so the token
// is forged, corrupted, or minted again by a coordinator restarted without
// its counter. It is logged like a stale fence.
type TokenConflictError struct {
	Rejection
}

func (e *TokenConflictError) Error() string {
	return fmt.Sprintf("leasefence: token conflict at %q: %s@%d presents the floor's fence, which belongs to %s",
		e.Resource, e.Holder, e.Fence, e.FloorHolder)
}

// Is reports whether target is ErrTokenConflict.
func (e *TokenConflictError) Is(target error) bool { return target == ErrTokenConflict }

// RejectionError is the error a gate returns for its logged refusal r: a
// *StaleFenceError for a fence below the floor, a *TokenConflictError for
// the floor's own fence under another holder. Every gate (in memory, in a
// database, in etcd) answers a refusal with it, so callers tell refusals
// apart the same way whatever the gate.
func RejectionError(r Rejection) error {
	if r.Fence < r.FloorFence {
		return &StaleFenceError{r}
	}
	return &TokenConflictError{r}
}

// RefusalNotLoggedError is a refusal a gate could not log: the write did
// not land, as for any refusal, but the gate's log does not hold it (or,
// when the store's answer to the log write was lost, is not known to hold
// it), so a caller must not count on finding it there. Rejection is the
// refusal as judged, with Seq 0; Err is why it was not logged (matching
// ctx.Err() when ctx ended). It matches ErrRefusalNotLogged, and Err
// through Unwrap; it deliberately does not match ErrStaleFence, which
// promises a logged refusal.
type RefusalNotLoggedError struct {
	Rejection
	Err error
}

func (e *RefusalNotLoggedError) Error() string {
	what := "stale fence"
	if e.Fence >= e.FloorFence {
		what = "token conflict"
	}
	return fmt.Sprintf("leasefence: %s at %q: %s@%d refused, floor is %s@%d; the refusal was not logged: %v",
		what, e.Resource, e.Holder, e.Fence, e.FloorHolder, e.FloorFence, e.Err)
}

// Is reports whether target is ErrRefusalNotLogged.
func (e *RefusalNotLoggedError) Is(target error) bool { return target == ErrRefusalNotLogged }

// Unwrap returns why the refusal was not logged.
func (e *RefusalNotLoggedError) Unwrap() error { return e.Err }

// ClockDomainError reports an operation across two clock domains. An empty
// domain stands for the zero Instant, which belongs to no clock.
type ClockDomainError struct {
	Left, Right Domain
}

func (e *ClockDomainError) Error() string {
	return fmt.Sprintf("leasefence: cannot relate an instant of %s to one of %s: clocks have unrelated origins",
		domainName(e.Left), domainName(e.Right))
}

// Is reports whether target is ErrClockDomain.
func (e *ClockDomainError) Is(target error) bool { return target == ErrClockDomain }

func domainName(d Domain) string {
	if d == "" {
		return "the zero Instant"
	}
	return fmt.Sprintf("clock %q", string(d))
}

// ClockError reports a clock source that read lower than a reading already
// handed out. Previous is the last reading given; Reading is the refused one.
type ClockError struct {
	Domain   Domain
	Previous time.Duration
	Reading  time.Duration
}

func (e *ClockError) Error() string {
	return fmt.Sprintf("leasefence: clock %q stepped backwards from %v to %v", string(e.Domain), e.Previous, e.Reading)
}

// Is reports whether target is ErrClockBackwards.
func (e *ClockError) Is(target error) bool { return target == ErrClockBackwards }
