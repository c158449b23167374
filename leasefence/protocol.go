package leasefence

import (
	"fmt"
	"time"
)

// Fence identifies one generation of ownership of a resource. Every
// acquisition mints a strictly higher fence; a renewal keeps it.
type Fence uint64

// Token is what a holder presents at the resource: who it is, what it holds,
// and the generation of ownership it holds it under.
type Token struct {
	Resource string `json:"resource"`
	Holder   string `json:"holder"`
	Fence    Fence  `json:"fence"`
}

// String renders the token as holder@fence on resource.
func (t Token) String() string {
	return fmt.Sprintf("%s@%d on %q", t.Holder, t.Fence, t.Resource)
}

// AcquireRequest asks the coordinator for a lease. Build it with
// Client.BeginAcquire, which records the send instant.
type AcquireRequest struct {
	RequestID string  `json:"requestId"`
	Holder    string  `json:"holder"`
	Resource  string  `json:"resource"`
	SentAt    Instant `json:"sentAt"` // informational; the client keeps its own copy
}

// RenewRequest asks the coordinator to extend a lease under the same fence.
// Build it with Client.BeginRenewal.
type RenewRequest struct {
	RequestID string  `json:"requestId"`
	Token     Token   `json:"token"`
	SentAt    Instant `json:"sentAt"`
}

// Grant is the coordinator's answer to a successful acquire or renew.
type Grant struct {
	RequestID string        `json:"requestId"`
	Token     Token         `json:"token"`
	TTL       time.Duration `json:"ttl"`
	// CoordinatorExpiresAt is stamped in the coordinator's clock domain. It
	// is for logs only: relating it to a holder's instant is a
	// *ClockDomainError.
	CoordinatorExpiresAt Instant `json:"coordinatorExpiresAt"`
	// Proof is the coordinator's Prover's credential for Token ("" without
	// a Prover). A renewal keeps the fence, so it keeps the proof.
	Proof string `json:"proof,omitempty"`
}

// Reason says why the coordinator refused a request. It is one of:
//
//   - ReasonHeld ("held"): another holder's lease is live.
//   - ReasonAlreadyHeld ("already-held"): the requester already holds a
//     live lease on the resource.
//   - ReasonExpired ("expired"): the lease expired; it is never
//     resurrected.
//   - ReasonSuperseded ("superseded"): a higher fence has been issued for
//     the resource.
//   - ReasonReleased ("released"): the lease was released.
//   - ReasonUnknown ("unknown"): the token was never issued for this
//     resource.
//   - ReasonStaleRequest ("stale-request"): a retried acquire whose grant
//     is no longer the live lease.
//   - ReasonRequestConflict ("request-conflict"): a request id already
//     used by another holder or for another resource.
//   - ReasonLockDelay ("lock-delay"): the resource's last lease expired
//     without a release less than the coordinator's LockDelay ago.
type Reason string

// The reasons a request is refused.
const (
	// ReasonHeld: another holder's lease is live.
	ReasonHeld Reason = "held"
	// ReasonAlreadyHeld: the requesting holder already holds a live lease on
	// the resource. A second lease would mint a higher fence and the resource
	// would refuse the holder's own in-flight writes.
	ReasonAlreadyHeld Reason = "already-held"
	// ReasonExpired: the lease expired. It is never resurrected, even when
	// nobody else took the resource: the holder must acquire again.
	ReasonExpired Reason = "expired"
	// ReasonSuperseded: a higher fence has been issued for the resource.
	ReasonSuperseded Reason = "superseded"
	// ReasonReleased: the lease was released.
	ReasonReleased Reason = "released"
	// ReasonUnknown: the token was never issued for this resource.
	ReasonUnknown Reason = "unknown"
	// ReasonStaleRequest: a retried acquire whose grant is no longer the live
	// lease.
	ReasonStaleRequest Reason = "stale-request"
	// ReasonRequestConflict: a request id already used by another holder or
	// for another resource.
	ReasonRequestConflict Reason = "request-conflict"
	// ReasonLockDelay: the resource's last lease ended without a release
	// (it expired) less than the coordinator's LockDelay ago; nobody, its
	// last holder included, is granted it until the delay has passed
	// (RetryAfter). Only an acquire is answered so.
	ReasonLockDelay Reason = "lock-delay"
)

// AcquireOutcome is the coordinator's answer to an AcquireRequest.
type AcquireOutcome struct {
	OK         bool          `json:"ok"`
	Grant      Grant         `json:"grant,omitzero"`
	Reason     Reason        `json:"reason,omitempty"`
	HeldBy     string        `json:"heldBy,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}

// RenewOutcome is the coordinator's answer to a RenewRequest.
type RenewOutcome struct {
	OK     bool   `json:"ok"`
	Grant  Grant  `json:"grant,omitzero"`
	Reason Reason `json:"reason,omitempty"`
}

// ReleaseOutcome is the coordinator's answer to a Release.
type ReleaseOutcome struct {
	OK     bool   `json:"ok"`
	Reason Reason `json:"reason,omitempty"`
}

// Rejection is one refused write, logged by the gate that refused it. The
// log is the evidence that two holders overlapped: the refused writer and
// the holder whose newer fence raised the floor.
type Rejection struct {
	Seq         uint64 `json:"seq"` // 1, 2, 3, ... per gate; 0 for an Admit, which is not logged
	Resource    string `json:"resource"`
	Holder      string `json:"holder"` // the refused writer
	Fence       Fence  `json:"fence"`
	FloorHolder string `json:"floorHolder"` // who raised the floor that refused it
	FloorFence  Fence  `json:"floorFence"`
}
