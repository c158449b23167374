package leasefence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Errors of Hold, TryHold and Session.
var (
	// ErrLeaseLost: a Session no longer holds its lease, because a renewal
	// was refused, its send-anchored deadline passed unrenewed, its client
	// clock failed, or it was released. Session.Err returns an error that
	// matches it and says which, in words.
	ErrLeaseLost = errors.New("leasefence: lease lost")
	// ErrReleased: the Session was released by its holder. An error that
	// matches it also matches ErrLeaseLost (the session holds nothing any
	// more), so code that stops on ErrLeaseLost stops on a release too;
	// match ErrReleased to tell a release from a loss.
	ErrReleased = errors.New("leasefence: lease released")
	// ErrHoldRefused: Hold got an answer it cannot wait out: the service
	// refused the acquire for a reason other than "held", "already-held",
	// "lock-delay" or "stale-request" (for instance "request-conflict").
	ErrHoldRefused = errors.New("leasefence: acquire refused")
	// ErrHeld: TryHold found the resource held. The concrete error is
	// *HeldError.
	ErrHeld = errors.New("leasefence: resource held")
	// ErrNoRoomToRenew: the lease a holder may count on (the granted TTL
	// less ClientOptions.ClockSkew) is not longer than the renewal period,
	// so every renewal would be sent at or after the deadline it must beat.
	// Hold releases the lease it got and says which numbers collide.
	ErrNoRoomToRenew = errors.New("leasefence: no room to renew")
)

// HeldError is TryHold's answer for a resource another lease holds.
type HeldError struct {
	Resource   string
	HeldBy     string        // the holder of the live lease (the caller itself for "already-held"); "" in a lock-delay
	RetryAfter time.Duration // until that lease expires, if it is not renewed, or the lock-delay ends
}

func (e *HeldError) Error() string {
	if e.HeldBy == "" {
		return fmt.Sprintf("leasefence: %s is in its lock-delay for another %v", e.Resource, e.RetryAfter)
	}
	return fmt.Sprintf("leasefence: %s is held by %s for another %v", e.Resource, e.HeldBy, e.RetryAfter)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// defaultFirstMaxWait is HoldOptions.MaxWait 0 before a grant tells the TTL.
const defaultFirstMaxWait = time.Second

// CleanupTimeout bounds each call Hold and TryHold make to clean up after
// an error (see "Clean-up after an error" at Hold), on a context detached
// from the caller's cancellation: the caller has already been refused, and
// waits this long at most for the service. Five seconds is many round
// trips to a store that answers at all, an etcd leader election (one
// second by default) and the client's retry after it; a grant whose TTL is
// shorter gets no more than its TTL, since the service frees it by then
// anyway.
const CleanupTimeout = 5 * time.Second

// HoldOptions configures Hold and TryHold.
type HoldOptions struct {
	// RenewEvery is the time from one renewal's send instant to the next
	// one's; 0 means a third of the lease the holder may count on (the
	// granted TTL less ClientOptions.ClockSkew, which is the time from a
	// send instant to the deadline it earns). It must be below that:
	// otherwise Hold releases the lease it got and fails with
	// ErrNoRoomToRenew, since such a session could only be lost. The only
	// renewals sent closer together are the retries of a renewal that got
	// no answer, which back off from a sixteenth of the period, doubling.
	RenewEvery time.Duration
	// MaxWait is the longest single wait between attempts, whether waiting
	// out a "held" answer or backing off after an error; 0 means one second
	// until a grant tells the TTL, the TTL after.
	MaxWait time.Duration
	// After returns a channel that delivers once d has passed on the
	// Client's clock. nil means real timers, right for a Client on a
	// monotonic clock. Set it when the Client's clock is not real time (a
	// ManualClock, a simulation) so the session waits on that clock. The
	// session never needs to stop a timer it started: it stops selecting
	// on it.
	After func(d time.Duration) <-chan time.Time
	// AdmitAt are gates Hold admits the new token at (Gate.Admit) before it
	// returns, each in turn: from then on they refuse the previous
	// holder's late writes even before this holder has written, which
	// closes the window fencing otherwise leaves open. A gate that fails
	// to admit it makes Hold release the lease and return that gate's
	// error; the release reaches the service even when the gate failed
	// because ctx ended (see "Clean-up after an error" at Hold).
	AdmitAt []Gate
	// Trace observes the session Hold returns; nil observes nothing.
	Trace *SessionTrace
	// OnRelease, if non-nil, runs once, after Session.Release has released
	// the lease through the service (whatever that answered), and its error
	// is joined to Release's. It is for what was started for this session
	// alone and must end with it: etcdlease.Lock closes the coordinator it
	// made. Hold does not run it when it fails: whoever set it closes what
	// it started then.
	OnRelease func() error
}

// Hold acquires resource through svc, waiting out "held", "already-held"
// and "lock-delay" answers (RetryAfter, capped by MaxWait, with jitter so that waiters do
// not return in step) and resending the SAME request after an error, so a
// lost reply never burns a fence: the service answers the retried id with
// the grant it already made. Then it renews in the background until
// Session.Release or loss.
//
// Hold never returns a session that is already lost. When errors outlast
// the lease (the retried request is answered with its first grant after
// that grant's deadline, which is anchored at the first send), Hold
// releases that grant and acquires afresh with a new request, within ctx.
//
// The granted TTL is the service's to choose, and some raise it (etcd
// grants at least its minimum TTL): Session.TTL tells what was granted, and
// the deadline and the renewal period follow it.
//
// # What the background renewal does and does not protect
//
// The renewals run on a goroutine of their own. A goroutine of the holder
// that stalls (a slow call, a lock, a model that takes a minute) does not
// lose the session: the renewals go on without it, and the lease stays its
// own while it is stalled. Only a stall of the whole process (a GC pause,
// SIGSTOP, a VM freeze) or of its network stops the renewals and lets the
// lease expire and be taken. So the session cannot tell a stalled
// goroutine that its turn is over, and checking Lost just before a write
// does not make the write safe: the write may still land after the lease
// was reassigned. What makes the stalled goroutine's late write safe is the
// gate at the resource, which judges the token in the same operation as
// the write (FenceGate.Commit, sqlgate, etcdlease) and refuses it once a
// newer holder has written or been admitted (HoldOptions.AdmitAt).
//
// ctx bounds only the acquisition: once Hold has returned, cancelling ctx
// does not end the session (its renewals and Session.Context keep ctx's
// values, such as a trace span, but not its cancellation).
//
// # Clean-up after an error
//
// After any error, Hold leaves nothing held, ctx's end included. A grant
// it will not hand out (dead on arrival, ErrNoRoomToRenew, a gate of
// AdmitAt that failed, a client clock that failed) is released; a request
// it gives up on unanswered (ctx ended, or TryHold's one attempt failed)
// may have been granted all the same, so it is resent once, the same
// request id, and whatever grant that answers is released. These clean-up
// calls do not run on ctx, which may have ended (the in-memory service,
// etcd's client and go-redis refuse an ended ctx before sending anything):
// each runs on a context that keeps ctx's values, not its cancellation,
// and ends after CleanupTimeout or the grant's TTL, whichever is shorter.
// So a Hold whose ctx ended returns about a round trip later when the
// service answers, and at most that bound later when it does not; a
// clean-up that fails leaves the grant to expire on its own. A wrapper
// around Hold (etcdlease.Lock, redislease.Lock) gets this for nothing; a
// clean-up of its own that calls a store follows the same rule.
//
// "already-held" is waited out like "held": it means another request of
// this holder got the lease (an earlier Hold whose reply was lost, or a
// second session of the same holder), and the lease is free again once that
// one expires or is released.
//
// A nil ctx, svc or c, or a negative option, is an error wrapping
// ErrInvalidRequest, and so is a service error wrapping it (a malformed
// call is not resent). A renewal period the lease leaves no room for is
// ErrNoRoomToRenew. An acquire answer that cannot be waited out wraps
// ErrHoldRefused. ctx's end returns an error matching ctx.Err().
func Hold(ctx context.Context, svc Service, c *Client, resource string, opts HoldOptions) (*Session, error) {
	return hold(ctx, svc, c, resource, opts, false)
}

// TryHold is Hold with one attempt and no waiting: one acquire request,
// and a session if it is granted. A resource another lease holds, or in
// its lock-delay, is an error matching ErrHeld (a *HeldError saying who
// holds it, nobody in a lock-delay, and for how long); an error from the service is returned as is, after the request is
// resent once to release a grant it may have made (see "Clean-up after an
// error" at Hold). Everything else is as for Hold.
func TryHold(ctx context.Context, svc Service, c *Client, resource string, opts HoldOptions) (*Session, error) {
	return hold(ctx, svc, c, resource, opts, true)
}

// acquisition is one call of Hold or TryHold.
type acquisition struct {
	ctx      context.Context
	svc      Service
	client   *Client
	resource string
	opts     HoldOptions
	after    func(time.Duration) <-chan time.Time
	once     bool // TryHold: one request, no wait
}

func hold(ctx context.Context, svc Service, c *Client, resource string, opts HoldOptions, once bool) (*Session, error) {
	switch {
	case ctx == nil:
		return nil, fmt.Errorf("%w: Hold with a nil context", ErrInvalidRequest)
	case svc == nil:
		return nil, fmt.Errorf("%w: Hold with a nil Service", ErrInvalidRequest)
	case c == nil:
		return nil, fmt.Errorf("%w: Hold with a nil Client", ErrInvalidRequest)
	case opts.RenewEvery < 0:
		return nil, fmt.Errorf("%w: HoldOptions.RenewEvery must be >= 0, got %v", ErrInvalidRequest, opts.RenewEvery)
	case opts.MaxWait < 0:
		return nil, fmt.Errorf("%w: HoldOptions.MaxWait must be >= 0, got %v", ErrInvalidRequest, opts.MaxWait)
	}
	a := &acquisition{ctx: ctx, svc: svc, client: c, resource: resource, opts: opts, after: opts.After, once: once}
	if a.after == nil {
		a.after = time.After
	}
	for {
		lease, err := a.acquire()
		if err != nil {
			return nil, err
		}
		if _, err := renewPeriod(opts.RenewEvery, lease, c.skew); err != nil {
			a.release(lease.Token, lease.TTL)
			return nil, fmt.Errorf("leasefence: hold %q: %w", resource, err)
		}
		left, err := lease.remaining()
		if err != nil {
			a.release(lease.Token, lease.TTL)
			return nil, fmt.Errorf("leasefence: hold %q: %w", resource, err)
		}
		if left <= 0 {
			// Dead on arrival: the grant answers a request sent too long
			// ago. Free it for others now rather than after its TTL.
			a.release(lease.Token, lease.TTL)
			if once {
				return nil, fmt.Errorf("%w: hold %q: the grant arrived past its deadline", ErrLeaseLost, resource)
			}
			continue
		}
		if err := a.admit(lease.Token); err != nil {
			a.release(lease.Token, lease.TTL)
			return nil, err
		}
		return startSession(ctx, svc, c, lease, opts, a.after)
	}
}

// acquire sends acquire requests until one is granted, and returns its
// lease: the same request again after an error, a new one after a refusal.
func (a *acquisition) acquire() (*Lease, error) {
	maxWait := a.opts.MaxWait
	if maxWait == 0 {
		maxWait = defaultFirstMaxWait
	}
	req, err := a.client.BeginAcquire(a.resource)
	if err != nil {
		return nil, err
	}
	var backoff time.Duration
	for {
		if err := a.ctx.Err(); err != nil {
			// Not sent, so nothing to settle.
			return nil, fmt.Errorf("leasefence: hold %q: %w", a.resource, err)
		}
		out, err := a.svc.Acquire(a.ctx, req)
		if err != nil {
			if errors.Is(err, ErrInvalidRequest) {
				// A malformed call: resending it cannot help.
				return nil, fmt.Errorf("leasefence: hold %q: %w", a.resource, err)
			}
			if err := a.retryAfter(err, &backoff, maxWait); err != nil {
				a.settle(req)
				return nil, err
			}
			continue // the same request: see Hold's doc comment
		}
		backoff = 0
		if out.OK {
			lease, err := a.client.CompleteAcquire(req, out.Grant)
			if err != nil {
				if !errors.Is(err, ErrGrantMismatch) {
					a.release(out.Grant.Token, out.Grant.TTL) // our grant, which the client cannot use
				}
				return nil, fmt.Errorf("leasefence: hold %q: %w", a.resource, err)
			}
			return lease, nil
		}
		switch out.Reason {
		case ReasonHeld, ReasonAlreadyHeld, ReasonLockDelay:
			if a.once {
				return nil, &HeldError{Resource: a.resource, HeldBy: out.HeldBy, RetryAfter: out.RetryAfter}
			}
			wait := out.RetryAfter
			if wait <= 0 {
				wait = maxWait
			}
			if err := waitCtx(a.ctx, a.after, jitter(wait, maxWait)); err != nil {
				return nil, fmt.Errorf("leasefence: hold %q (held by %q): %w", a.resource, out.HeldBy, err)
			}
		case ReasonStaleRequest:
			// Our request was granted and that lease is gone: there is
			// nothing to wait for, only a new request to send. (A TryHold
			// never resends, so never hears it.)
			if a.once {
				return nil, fmt.Errorf("%w: hold %q: %q", ErrHoldRefused, a.resource, out.Reason)
			}
		default:
			return nil, fmt.Errorf("%w: hold %q: %q", ErrHoldRefused, a.resource, out.Reason)
		}
		// A refused request is done with; a new one is stamped with a new
		// send instant, so the wait does not eat into the next lease.
		if req, err = a.client.BeginAcquire(a.resource); err != nil {
			return nil, err
		}
	}
}

// retryAfter decides what follows an acquire that got no answer (err):
// nil once it has backed off and the same request may be resent, or the
// error Hold returns when it gives up (ctx ended, or TryHold's one
// attempt).
func (a *acquisition) retryAfter(err error, backoff *time.Duration, maxWait time.Duration) error {
	switch {
	case a.ctx.Err() != nil:
		return fmt.Errorf("leasefence: hold %q: %w (last error: %v)", a.resource, a.ctx.Err(), err)
	case a.once:
		return fmt.Errorf("leasefence: hold %q: %w", a.resource, err)
	}
	*backoff = nextBackoff(*backoff, maxWait)
	if err := waitCtx(a.ctx, a.after, jitter(*backoff, maxWait)); err != nil {
		return fmt.Errorf("leasefence: hold %q: %w", a.resource, err)
	}
	return nil
}

// settle releases the grant, if any, of req, which Hold gives up on
// unanswered: the service may have granted it, and answers the same
// request id again with that grant (see Service). Best effort, like
// release.
func (a *acquisition) settle(req AcquireRequest) {
	ctx, cancel := cleanupContext(a.ctx, 0)
	defer cancel()
	out, err := a.svc.Acquire(ctx, req)
	if err != nil || !out.OK {
		return
	}
	if g := out.Grant; g.RequestID == req.RequestID && g.Token.Holder == req.Holder && g.Token.Resource == req.Resource {
		a.release(g.Token, g.TTL)
	}
}

// release frees a grant Hold will not hand out, best effort: if it fails,
// the grant expires on its own after its TTL.
func (a *acquisition) release(t Token, ttl time.Duration) {
	ctx, cancel := cleanupContext(a.ctx, ttl)
	defer cancel()
	_, _ = a.svc.Release(ctx, t)
}

// cleanupContext is the context of a clean-up call after an error: ctx's
// values without its cancellation, ended after CleanupTimeout or ttl (a
// grant's TTL; 0 when none is known), whichever is shorter.
func cleanupContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	d := CleanupTimeout
	if ttl > 0 {
		d = min(d, ttl)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// admit admits t at every gate of HoldOptions.AdmitAt.
func (a *acquisition) admit(t Token) error {
	for _, g := range a.opts.AdmitAt {
		if g == nil {
			return fmt.Errorf("%w: HoldOptions.AdmitAt holds a nil Gate", ErrInvalidRequest)
		}
		if err := g.Admit(a.ctx, t); err != nil {
			return fmt.Errorf("leasefence: hold %q: admit %v at the gate of %q: %w", a.resource, t, g.Resource(), err)
		}
	}
	return nil
}

// renewPeriod is the time from one renewal's send instant to the next one's
// for lease l of a client with skew: every, or a third of the window if
// every is 0. The window, TTL - skew, is the time from a send instant to
// the deadline it earns; a period that does not fit in it is refused.
func renewPeriod(every time.Duration, l *Lease, skew time.Duration) (time.Duration, error) {
	window := l.TTL - skew
	asked := every
	if every == 0 {
		every = window / 3
	}
	if every > 0 && every < window {
		return every, nil
	}
	how := fmt.Sprintf("HoldOptions.RenewEvery %v", asked)
	if asked == 0 {
		how = fmt.Sprintf("renewing every %v (a third of it)", every)
	}
	return 0, fmt.Errorf("%w: %s does not fit in the %v a lease lasts for this holder (granted TTL %v - ClientOptions.ClockSkew %v): every renewal would be sent at or after the deadline it must beat",
		ErrNoRoomToRenew, how, max(window, 0), l.TTL, skew)
}

// remaining is how long the lease has left on its client's clock.
func (l *Lease) remaining() (time.Duration, error) {
	now, err := l.clock.Now()
	if err != nil {
		return 0, fmt.Errorf("leasefence: client clock: %w", err)
	}
	return l.Deadline.Sub(now)
}

// waitCtx waits d on after's clock, or until ctx ends.
func waitCtx(ctx context.Context, after func(time.Duration) <-chan time.Time, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-after(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nextBackoff doubles the previous backoff, starting at limit/16 and capped
// at limit.
func nextBackoff(prev, limit time.Duration) time.Duration {
	if prev == 0 {
		return max(limit/16, time.Millisecond)
	}
	return min(2*prev, limit)
}

// jitter spreads a wait of base (capped at limit) by up to a quarter of it:
// longer when that stays within limit, shorter otherwise, so waiters sent
// away together do not come back together.
func jitter(base, limit time.Duration) time.Duration {
	base = min(base, limit)
	if base <= 0 {
		return 0
	}
	j := rand.N(base/4 + 1)
	if base+j <= limit {
		return base + j
	}
	return base - j
}
