package leasefence

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// DefaultReplayCache is the number of acquire grants a Coordinator remembers
// for retried requests when CoordinatorOptions.ReplayCache is 0.
const DefaultReplayCache = 1024

// CoordinatorOptions configures a Coordinator.
type CoordinatorOptions struct {
	Clock      Clock         // required
	TTL        time.Duration // required, > 0
	StartFence Fence         // every fence issued is > StartFence (resume after a restart)
	// ReplayCache is how many acquire grants are remembered for retries; 0
	// means DefaultReplayCache. A retry whose entry was evicted is treated
	// as a fresh acquisition and burns a fence.
	ReplayCache int
	// Trace, if non-nil, observes every answered request.
	Trace *CoordinatorTrace
}

// Coordinator grants leases and mints fences. It is safe for concurrent use.
//
// It reads its own clock once per call and dates everything in that call
// from that one reading: the coordinator's reading when it processes a
// request is the only moment it can vouch for.
type Coordinator struct {
	clock Clock
	ttl   time.Duration
	trace *CoordinatorTrace

	mu     sync.Mutex
	fence  Fence                  // highest fence issued, over all resources
	leases map[string]leaseState  // by resource: the latest lease issued
	replay map[string]replayEntry // by request id: acquire grants for retries
	order  []string               // ring of request ids in replay, oldest at next
	next   int                    // where the next request id goes in order
}

type leaseState struct {
	token    Token
	expiry   Instant
	released bool
}

type replayEntry struct {
	grant Grant
}

// NewCoordinator returns a coordinator, or an error wrapping
// ErrInvalidRequest when an option is missing or out of range.
func NewCoordinator(opts CoordinatorOptions) (*Coordinator, error) {
	switch {
	case opts.Clock == nil:
		return nil, fmt.Errorf("%w: CoordinatorOptions.Clock is required", ErrInvalidRequest)
	case opts.TTL <= 0:
		return nil, fmt.Errorf("%w: CoordinatorOptions.TTL must be > 0, got %v", ErrInvalidRequest, opts.TTL)
	case opts.ReplayCache < 0:
		return nil, fmt.Errorf("%w: CoordinatorOptions.ReplayCache must be >= 0, got %d", ErrInvalidRequest, opts.ReplayCache)
	}
	n := opts.ReplayCache
	if n == 0 {
		n = DefaultReplayCache
	}
	return &Coordinator{
		clock:  opts.Clock,
		ttl:    opts.TTL,
		trace:  opts.Trace,
		fence:  opts.StartFence,
		leases: make(map[string]leaseState),
		replay: make(map[string]replayEntry, n),
		order:  make([]string, n),
	}, nil
}

// IssuedFence returns the highest fence issued so far (StartFence if none).
// Persist it and pass it back as StartFence to resume after a restart.
func (c *Coordinator) IssuedFence() Fence {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fence
}

// TTL returns the lease duration the coordinator grants.
func (c *Coordinator) TTL() time.Duration { return c.ttl }

// Acquire grants a lease on a free, expired or released resource under a
// newly minted fence. A live lease answers "held" (another holder) or
// "already-held" (the same holder), with HeldBy and RetryAfter. A repeated
// RequestID answers with the grant already made while that lease is live,
// "stale-request" once it is not, and "request-conflict" when the id was used
// by another holder or for another resource.
//
// The error is non-nil only when the clock fails or the request is malformed.
func (c *Coordinator) Acquire(req AcquireRequest) (AcquireOutcome, error) {
	if err := validateAcquire(req); err != nil {
		return AcquireOutcome{}, err
	}
	c.mu.Lock()
	now, err := c.clock.Now()
	if err != nil {
		c.mu.Unlock()
		return AcquireOutcome{}, fmt.Errorf("leasefence: coordinator clock: %w", err)
	}
	out, replayed := c.acquireLocked(req, now)
	c.mu.Unlock()
	if c.trace != nil && c.trace.Acquire != nil {
		c.trace.Acquire(AcquireInfo{Request: req, Outcome: out, Replayed: replayed, At: now})
	}
	return out, nil
}

func (c *Coordinator) acquireLocked(req AcquireRequest, now Instant) (out AcquireOutcome, replayed bool) {
	if e, ok := c.replay[req.RequestID]; ok {
		t := e.grant.Token
		if t.Holder != req.Holder || t.Resource != req.Resource {
			return AcquireOutcome{Reason: ReasonRequestConflict}, false
		}
		if st := c.leases[t.Resource]; st.token == t && st.liveAt(now) {
			return AcquireOutcome{OK: true, Grant: e.grant}, true
		}
		return AcquireOutcome{Reason: ReasonStaleRequest}, false
	}
	if st, ok := c.leases[req.Resource]; ok && st.liveAt(now) {
		reason := ReasonHeld
		if st.token.Holder == req.Holder {
			reason = ReasonAlreadyHeld
		}
		left, _ := st.expiry.Sub(now) // same domain: both read off c.clock
		return AcquireOutcome{Reason: reason, HeldBy: st.token.Holder, RetryAfter: left}, false
	}
	c.fence++
	st := leaseState{
		token:  Token{Resource: req.Resource, Holder: req.Holder, Fence: c.fence},
		expiry: now.Add(c.ttl),
	}
	c.leases[req.Resource] = st
	g := Grant{RequestID: req.RequestID, Token: st.token, TTL: c.ttl, CoordinatorExpiresAt: st.expiry}
	c.remember(g)
	return AcquireOutcome{OK: true, Grant: g}, false
}

// remember puts g in the replay cache, evicting the oldest entry when full.
func (c *Coordinator) remember(g Grant) {
	if old := c.order[c.next]; old != "" {
		delete(c.replay, old)
	}
	c.order[c.next] = g.RequestID
	c.next = (c.next + 1) % len(c.order)
	c.replay[g.RequestID] = replayEntry{grant: g}
}

// Renew extends the current live lease to the coordinator's reading + TTL
// under the same fence. Otherwise it answers why not: "expired" (never
// resurrected, even when nobody else took the resource), "superseded" (a
// higher fence was issued for the resource), "released", or "unknown".
//
// The error is non-nil only when the clock fails or the request is malformed.
func (c *Coordinator) Renew(req RenewRequest) (RenewOutcome, error) {
	if req.RequestID == "" {
		return RenewOutcome{}, fmt.Errorf("%w: renew request has no request id", ErrInvalidRequest)
	}
	if err := validateToken(req.Token); err != nil {
		return RenewOutcome{}, err
	}
	c.mu.Lock()
	now, err := c.clock.Now()
	if err != nil {
		c.mu.Unlock()
		return RenewOutcome{}, fmt.Errorf("leasefence: coordinator clock: %w", err)
	}
	var out RenewOutcome
	if reason := c.classifyLocked(req.Token, now); reason != "" {
		out = RenewOutcome{Reason: reason}
	} else {
		st := c.leases[req.Token.Resource]
		st.expiry = now.Add(c.ttl)
		c.leases[req.Token.Resource] = st
		out = RenewOutcome{OK: true, Grant: Grant{
			RequestID: req.RequestID, Token: st.token, TTL: c.ttl, CoordinatorExpiresAt: st.expiry,
		}}
	}
	c.mu.Unlock()
	if c.trace != nil && c.trace.Renew != nil {
		c.trace.Renew(RenewInfo{Request: req, Outcome: out, At: now})
	}
	return out, nil
}

// Release frees the resource if t is its current live lease; the next
// acquisition mints a higher fence. Anything else answers with the same
// reasons as Renew.
//
// The error is non-nil only when the clock fails or the token is malformed.
func (c *Coordinator) Release(t Token) (ReleaseOutcome, error) {
	if err := validateToken(t); err != nil {
		return ReleaseOutcome{}, err
	}
	c.mu.Lock()
	now, err := c.clock.Now()
	if err != nil {
		c.mu.Unlock()
		return ReleaseOutcome{}, fmt.Errorf("leasefence: coordinator clock: %w", err)
	}
	var out ReleaseOutcome
	if reason := c.classifyLocked(t, now); reason != "" {
		out = ReleaseOutcome{Reason: reason}
	} else {
		st := c.leases[t.Resource]
		st.released = true
		c.leases[t.Resource] = st
		out = ReleaseOutcome{OK: true}
	}
	c.mu.Unlock()
	if c.trace != nil && c.trace.Release != nil {
		c.trace.Release(ReleaseInfo{Token: t, Outcome: out, At: now})
	}
	return out, nil
}

// classifyLocked returns "" when t is the resource's current live lease, and
// otherwise the reason it is not.
func (c *Coordinator) classifyLocked(t Token, now Instant) Reason {
	st, ok := c.leases[t.Resource]
	switch {
	case !ok || t.Fence > st.token.Fence:
		return ReasonUnknown
	case t.Fence < st.token.Fence:
		return ReasonSuperseded
	case t.Holder != st.token.Holder:
		return ReasonUnknown
	case st.released:
		return ReasonReleased
	case !st.liveAt(now):
		return ReasonExpired
	}
	return ""
}

// liveAt reports whether the lease is live at now: not released and now
// before its expiry (a lease is expired at and after its expiry instant).
func (st leaseState) liveAt(now Instant) bool {
	if st.released {
		return false
	}
	before, err := now.Before(st.expiry)
	return err == nil && before
}

func validateAcquire(req AcquireRequest) error {
	var missing []string
	if req.RequestID == "" {
		missing = append(missing, "no request id")
	}
	if req.Holder == "" {
		missing = append(missing, "no holder")
	}
	if req.Resource == "" {
		missing = append(missing, "no resource")
	}
	if missing != nil {
		return fmt.Errorf("%w: acquire request has %s", ErrInvalidRequest, strings.Join(missing, ", "))
	}
	return nil
}

// validateToken refuses tokens no coordinator could have issued: fence 0 is
// never minted (fences start after StartFence >= 0) and every lease has a
// holder and a resource.
func validateToken(t Token) error {
	if t.Resource != "" && t.Holder != "" && t.Fence != 0 {
		return nil
	}
	return invalidToken(t)
}

// invalidToken explains what is wrong with t; kept apart from
// validateToken so that the check itself stays small enough to inline.
func invalidToken(t Token) error {
	var problems []string
	if t.Resource == "" {
		problems = append(problems, "no resource")
	}
	if t.Holder == "" {
		problems = append(problems, "no holder")
	}
	if t.Fence == 0 {
		problems = append(problems, "fence 0, which is never issued")
	}
	if problems != nil {
		return fmt.Errorf("%w: token %v has %s", ErrInvalidRequest, t, strings.Join(problems, ", "))
	}
	return nil
}
