package leasefence

import (
	"fmt"
	"math"
	"sync"
	"time"
)

const (
	// DefaultReplayCache is the number of acquire grants a Coordinator
	// remembers for retried requests when CoordinatorOptions.ReplayCache
	// is 0.
	DefaultReplayCache = 1024
	// MaxReplayCache bounds CoordinatorOptions.ReplayCache. The cache grows
	// as grants are made, up to its size, so a large size costs nothing
	// until it is used; at this bound it holds some hundreds of MiB.
	MaxReplayCache = 1 << 20
	// MaxTTL bounds CoordinatorOptions.TTL (and a Grant's TTL at the
	// client): about 146 years, a quarter of what an Instant's offset
	// (int64 nanoseconds) can span. A clock reading r is then good for
	// leases until r + TTL overflows, which for a clock read from an origin
	// near its first reading (NewMonotonicClock) is after another 146
	// years; a reading closer than TTL to the end of the range grants
	// nothing and is answered with ErrOutOfRange.
	MaxTTL = time.Duration(1 << 62)
)

// CoordinatorOptions configures a Coordinator.
type CoordinatorOptions struct {
	Clock Clock         // required
	TTL   time.Duration // required, > 0
	// StartFence: every fence issued is > StartFence (resume after a
	// restart). Once the coordinator has issued the highest Fence there is,
	// Acquire fails with ErrFencesExhausted rather than wrap.
	StartFence Fence
	// ReplayCache is how many acquire grants are remembered for retries,
	// at most MaxReplayCache; 0 means DefaultReplayCache. A retry whose
	// entry was evicted is answered as a fresh acquisition would be: while
	// the holder's lease is live, "already-held" (HeldBy is the holder
	// itself); once it is not, a new grant under a new fence, where a
	// remembered retry would have been answered "stale-request".
	ReplayCache int
	// Trace, if non-nil, observes every answered request.
	Trace *CoordinatorTrace
	// Prover, if non-nil, proves every fresh grant (Grant.Proof); nil: no
	// proofs. See Prover for when it is called.
	Prover Prover
	// LockDelay: after a lease ends without a release (it expired, its
	// holder's renewals having stopped or been lost), the resource is
	// refused to every acquirer, its last holder included, until LockDelay
	// has passed since the lease's expiry: "lock-delay"
	// (ReasonLockDelay), with a RetryAfter covering the rest of the delay.
	// A release ends the lease at once, with no delay. 0 (the default): no
	// delay. At most MaxLockDelay unless AllowLongLockDelay; never
	// negative. It is for a resource that cannot check a fence, and buys a
	// probability, not a guarantee: see docs/library.md.
	LockDelay time.Duration
	// AllowLongLockDelay accepts a LockDelay above MaxLockDelay.
	AllowLongLockDelay bool
}

// Coordinator grants leases and mints fences. It is safe for concurrent use.
// Make one with NewCoordinator: the methods of the zero Coordinator answer
// ErrUninitialized.
//
// It reads its own clock once per call and dates everything in that call
// from that one reading: the coordinator's reading when it processes a
// request is the only moment it can vouch for.
type Coordinator struct {
	clock  Clock
	ttl    time.Duration
	trace  *CoordinatorTrace
	prover Prover
	delay  time.Duration // CoordinatorOptions.LockDelay

	mu     sync.Mutex
	fence  Fence                 // highest fence issued, over all resources
	leases map[string]leaseState // by resource: the latest lease issued
	// The replay cache: the last limit acquire grants, for retries. The
	// index holds positions in the ring, not grants, so that its slots
	// stay small: every acquire looks its request id up in it, and every
	// grant evicts one entry and adds one.
	replay  map[string]int32 // by request id: the grant's position in granted
	granted []Grant          // ring of grants in replay: grows to limit, then oldest at next
	limit   int              // the replay cache's size
	next    int              // where the next grant goes in granted, once it is full
}

type leaseState struct {
	token    Token
	expiry   Instant
	released bool
	proof    string
}

// NewCoordinator returns a coordinator, or an error wrapping
// ErrInvalidRequest when an option is missing or out of range.
func NewCoordinator(opts CoordinatorOptions) (*Coordinator, error) {
	switch {
	case opts.Clock == nil:
		return nil, fmt.Errorf("%w: CoordinatorOptions.Clock is required", ErrInvalidRequest)
	case opts.TTL <= 0 || opts.TTL > MaxTTL:
		return nil, fmt.Errorf("%w: CoordinatorOptions.TTL must be > 0 and <= MaxTTL (%v), got %v", ErrInvalidRequest, MaxTTL, opts.TTL)
	case opts.ReplayCache < 0 || opts.ReplayCache > MaxReplayCache:
		return nil, fmt.Errorf("%w: CoordinatorOptions.ReplayCache must be >= 0 and <= MaxReplayCache (%d), got %d", ErrInvalidRequest, MaxReplayCache, opts.ReplayCache)
	}
	if err := ValidateLockDelay("CoordinatorOptions.LockDelay", opts.LockDelay, opts.AllowLongLockDelay); err != nil {
		return nil, err
	}
	n := opts.ReplayCache
	if n == 0 {
		n = DefaultReplayCache
	}
	return &Coordinator{
		clock:  opts.Clock,
		ttl:    opts.TTL,
		trace:  opts.Trace,
		prover: opts.Prover,
		delay:  opts.LockDelay,
		fence:  opts.StartFence,
		leases: make(map[string]leaseState),
		replay: make(map[string]int32, min(n, DefaultReplayCache)),
		limit:  n,
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
// "already-held" (the same holder), with HeldBy and RetryAfter; a lease
// that expired less than LockDelay ago answers "lock-delay" to everyone,
// with RetryAfter and no HeldBy. A repeated
// RequestID answers with the grant already made while that lease is live,
// "stale-request" once it is not, and "request-conflict" when the id was used
// by another holder or for another resource.
//
// The error is non-nil only when the clock fails, the request is malformed,
// the clock reads too close to the end of its range to date the lease
// (ErrOutOfRange, see MaxTTL), or the last fence has been issued
// (ErrFencesExhausted); none of these changes anything.
func (c *Coordinator) Acquire(req AcquireRequest) (AcquireOutcome, error) {
	if err := c.check(); err != nil {
		return AcquireOutcome{}, err
	}
	if err := ValidateAcquire(req); err != nil {
		return AcquireOutcome{}, err
	}
	var out AcquireOutcome
	var replayed bool
	now, err := c.atReading(func(now Instant) (err error) {
		out, replayed, err = c.acquireLocked(req, now)
		return err
	})
	if err != nil {
		return AcquireOutcome{}, err
	}
	if c.trace != nil && c.trace.Acquire != nil {
		c.trace.Acquire(AcquireInfo{Request: req, Outcome: out, Replayed: replayed, At: now})
	}
	return out, nil
}

func (c *Coordinator) acquireLocked(req AcquireRequest, now Instant) (out AcquireOutcome, replayed bool, err error) {
	if i, ok := c.replay[req.RequestID]; ok {
		g := &c.granted[i]
		t := g.Token
		if t.Holder != req.Holder || t.Resource != req.Resource {
			return AcquireOutcome{Reason: ReasonRequestConflict}, false, nil
		}
		if st := c.leases[t.Resource]; st.token == t && st.liveAt(now) {
			return AcquireOutcome{OK: true, Grant: *g}, true, nil
		}
		return AcquireOutcome{Reason: ReasonStaleRequest}, false, nil
	}
	if st, ok := c.leases[req.Resource]; ok && st.liveAt(now) {
		reason := ReasonHeld
		if st.token.Holder == req.Holder {
			reason = ReasonAlreadyHeld
		}
		left, _ := st.expiry.Sub(now) // same domain: both read off c.clock
		return AcquireOutcome{Reason: reason, HeldBy: st.token.Holder, RetryAfter: left}, false, nil
	} else if left := lockDelayLeft(st, c.delay, now); ok && left > 0 {
		return AcquireOutcome{Reason: ReasonLockDelay, RetryAfter: left}, false, nil
	}
	// Both refusals below come before anything changes: a lease that
	// cannot be dated, or a fence that would wrap, is never granted.
	expiry, err := c.expiryAt(now)
	if err != nil {
		return AcquireOutcome{}, false, err
	}
	if c.fence == math.MaxUint64 {
		return AcquireOutcome{}, false, fmt.Errorf("%w: fence %d has been issued", ErrFencesExhausted, c.fence)
	}
	st := leaseState{
		token:  Token{Resource: req.Resource, Holder: req.Holder, Fence: c.fence + 1},
		expiry: expiry,
	}
	if st.proof, err = prove(c.prover, st.token); err != nil {
		return AcquireOutcome{}, false, err
	}
	c.fence++
	c.leases[req.Resource] = st
	g := Grant{RequestID: req.RequestID, Token: st.token, TTL: c.ttl, CoordinatorExpiresAt: st.expiry, Proof: st.proof}
	c.remember(g)
	return AcquireOutcome{OK: true, Grant: g}, false, nil
}

// expiryAt is the expiry of a lease granted or renewed at now, or
// ErrOutOfRange when now + TTL does not fit an Instant.
func (c *Coordinator) expiryAt(now Instant) (Instant, error) {
	expiry, ok := now.addChecked(c.ttl)
	if !ok {
		return Instant{}, fmt.Errorf("%w: coordinator reading %v + TTL %v", ErrOutOfRange, now, c.ttl)
	}
	return expiry, nil
}

// remember puts g in the replay cache, evicting the oldest entry when full.
func (c *Coordinator) remember(g Grant) {
	i := c.next
	if len(c.granted) < c.limit {
		i = len(c.granted)
		c.granted = append(c.granted, g)
	} else {
		delete(c.replay, c.granted[i].RequestID)
		c.granted[i] = g
		c.next = (c.next + 1) % c.limit
	}
	c.replay[g.RequestID] = int32(i)
}

// atReading runs f under the coordinator's lock with one reading of its
// clock, and returns that reading. The lock is released however f or the
// clock ends, a panic included, so a Clock that panics cannot wedge the
// coordinator.
func (c *Coordinator) atReading(f func(now Instant) error) (Instant, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, err := c.clock.Now()
	if err != nil {
		return Instant{}, fmt.Errorf("leasefence: coordinator clock: %w", err)
	}
	return now, f(now)
}

// check refuses a call on the zero Coordinator before it touches anything.
func (c *Coordinator) check() error {
	if c.clock == nil {
		return fmt.Errorf("%w: a zero Coordinator; make one with NewCoordinator", ErrUninitialized)
	}
	return nil
}

// Renew extends the current live lease to the coordinator's reading + TTL
// under the same fence. Otherwise it answers why not: "expired" (never
// resurrected, even when nobody else took the resource), "superseded" (a
// higher fence was issued for the resource), "released", or "unknown".
//
// The error is non-nil only when the clock fails, the request is malformed
// or the clock reads too close to the end of its range to date the lease
// (ErrOutOfRange); none of these changes anything.
func (c *Coordinator) Renew(req RenewRequest) (RenewOutcome, error) {
	if err := c.check(); err != nil {
		return RenewOutcome{}, err
	}
	if err := ValidateRenew(req); err != nil {
		return RenewOutcome{}, err
	}
	var out RenewOutcome
	now, err := c.atReading(func(now Instant) error {
		if reason := c.classifyLocked(req.Token, now); reason != "" {
			out = RenewOutcome{Reason: reason}
			return nil
		}
		expiry, err := c.expiryAt(now)
		if err != nil {
			return err
		}
		st := c.leases[req.Token.Resource]
		st.expiry = expiry
		c.leases[req.Token.Resource] = st
		out = RenewOutcome{OK: true, Grant: Grant{
			RequestID: req.RequestID, Token: st.token, TTL: c.ttl, CoordinatorExpiresAt: st.expiry, Proof: st.proof,
		}}
		return nil
	})
	if err != nil {
		return RenewOutcome{}, err
	}
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
	if err := c.check(); err != nil {
		return ReleaseOutcome{}, err
	}
	if err := validateToken(t); err != nil {
		return ReleaseOutcome{}, err
	}
	var out ReleaseOutcome
	now, err := c.atReading(func(now Instant) error {
		if reason := c.classifyLocked(t, now); reason != "" {
			out = ReleaseOutcome{Reason: reason}
			return nil
		}
		st := c.leases[t.Resource]
		st.released = true
		c.leases[t.Resource] = st
		out = ReleaseOutcome{OK: true}
		return nil
	})
	if err != nil {
		return ReleaseOutcome{}, err
	}
	if c.trace != nil && c.trace.Release != nil {
		c.trace.Release(ReleaseInfo{Token: t, Outcome: out, At: now})
	}
	return out, nil
}

// Holder returns the token of the live lease on resource and true, or the
// zero Token and false when the resource is free, released or expired at
// the coordinator's reading. The error is non-nil only when the clock
// fails or resource is empty.
//
// ADVISORY, like Lease.HasExpired: the answer is true at the reading only.
func (c *Coordinator) Holder(resource string) (Token, bool, error) {
	if err := c.check(); err != nil {
		return Token{}, false, err
	}
	if resource == "" {
		return Token{}, false, fmt.Errorf("%w: holder of an empty resource", ErrInvalidRequest)
	}
	var t Token
	var held bool
	_, err := c.atReading(func(now Instant) error {
		if st, ok := c.leases[resource]; ok && st.liveAt(now) {
			t, held = st.token, true
		}
		return nil
	})
	return t, held, err
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
