package leasefence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Errors of Hold and Session.
var (
	// ErrLeaseLost: a Session no longer holds its lease, because a renewal
	// was refused, its send-anchored deadline passed unrenewed, its client
	// clock failed, or it was released. Session.Err wraps it and says which.
	ErrLeaseLost = errors.New("leasefence: lease lost")
	// ErrHoldRefused: Hold got an answer it cannot wait out: the service
	// refused the acquire for a reason other than "held", "already-held" or
	// "stale-request" (for instance "request-conflict").
	ErrHoldRefused = errors.New("leasefence: acquire refused")
)

// defaultFirstMaxWait is HoldOptions.MaxWait 0 before a grant tells the TTL.
const defaultFirstMaxWait = time.Second

// HoldOptions configures Hold.
type HoldOptions struct {
	// RenewEvery is the time from one renewal's send instant to the next
	// renewal; 0 means a third of the granted TTL. It must be below the
	// granted TTL: one at or above it makes Hold release the lease it got
	// and fail with ErrInvalidRequest, since such a session could only be
	// lost.
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
}

// Hold acquires resource through svc, waiting out "held" and "already-held"
// answers (RetryAfter, capped by MaxWait, with jitter so that waiters do
// not return in step) and resending the SAME request after an error, so a
// lost reply never burns a fence: the service answers the retried id with
// the grant it already made. Then it renews in the background until
// Session.Release or loss.
//
// ctx bounds only the acquisition: once Hold has returned, cancelling ctx
// does not end the session (its renewals keep ctx's values, such as a trace
// span, but not its cancellation). If ctx ends while a request is
// unanswered, a grant the service may have made is left to expire.
//
// "already-held" is waited out like "held": it means another request of
// this holder got the lease (an earlier Hold whose reply was lost, or a
// second session of the same holder), and the lease is free again once that
// one expires or is released.
//
// A nil ctx, svc or c, or a negative option, is an error wrapping
// ErrInvalidRequest, and so is a service error wrapping it (a malformed
// call is not resent). An acquire answer that cannot be waited out wraps
// ErrHoldRefused. ctx's end returns an error matching ctx.Err().
func Hold(ctx context.Context, svc Service, c *Client, resource string, opts HoldOptions) (*Session, error) {
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
	after := opts.After
	if after == nil {
		after = time.After
	}
	maxWait := opts.MaxWait
	if maxWait == 0 {
		maxWait = defaultFirstMaxWait
	}
	req, err := c.BeginAcquire(resource)
	if err != nil {
		return nil, err
	}
	var backoff time.Duration
	for {
		out, err := svc.Acquire(ctx, req)
		if err != nil {
			if errors.Is(err, ErrInvalidRequest) {
				// A malformed call: resending it cannot help.
				return nil, fmt.Errorf("leasefence: hold %q: %w", resource, err)
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("leasefence: hold %q: %w (last error: %v)", resource, ctx.Err(), err)
			}
			backoff = nextBackoff(backoff, maxWait)
			if err := waitCtx(ctx, after, jitter(backoff, maxWait)); err != nil {
				return nil, fmt.Errorf("leasefence: hold %q: %w", resource, err)
			}
			continue // the same request: see the doc comment
		}
		backoff = 0
		if out.OK {
			lease, err := c.CompleteAcquire(req, out.Grant)
			if err != nil {
				return nil, fmt.Errorf("leasefence: hold %q: %w", resource, err)
			}
			return startSession(ctx, svc, c, lease, opts, after)
		}
		switch out.Reason {
		case ReasonHeld, ReasonAlreadyHeld:
			wait := out.RetryAfter
			if wait <= 0 {
				wait = maxWait
			}
			if err := waitCtx(ctx, after, jitter(wait, maxWait)); err != nil {
				return nil, fmt.Errorf("leasefence: hold %q (held by %q): %w", resource, out.HeldBy, err)
			}
		case ReasonStaleRequest:
			// Our request was granted and that lease is gone: there is
			// nothing to wait for, only a new request to send.
		default:
			return nil, fmt.Errorf("%w: hold %q: %q", ErrHoldRefused, resource, out.Reason)
		}
		// A refused request is done with; a new one is stamped with a new
		// send instant, so the wait does not eat into the next lease.
		if req, err = c.BeginAcquire(resource); err != nil {
			return nil, err
		}
	}
}

// Session is a lease kept alive in the background by Hold. Its methods are
// safe for concurrent use.
//
// Lost is advisory like Lease.HasExpired: it tells the holder to stop
// starting work. A write already in flight is refused, if it must be, by the
// resource's gate, not by the session.
type Session struct {
	svc        Service
	client     *Client
	token      Token
	renewEvery time.Duration // 0: a third of the latest grant's TTL
	maxWait    time.Duration // 0: the latest grant's TTL
	after      func(time.Duration) <-chan time.Time

	ctx    context.Context    // the renewals' context: Hold's values, the session's life
	cancel context.CancelFunc // ends a renewal in flight

	mu    sync.Mutex
	lease Lease
	err   error

	lost     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the renewing goroutine has returned
}

func startSession(ctx context.Context, svc Service, c *Client, l *Lease, opts HoldOptions, after func(time.Duration) <-chan time.Time) (*Session, error) {
	if opts.RenewEvery >= l.TTL {
		// Best effort: the lease is useless, so free it for others now.
		_, _ = svc.Release(ctx, l.Token)
		return nil, fmt.Errorf("%w: HoldOptions.RenewEvery %v is not below the granted TTL %v", ErrInvalidRequest, opts.RenewEvery, l.TTL)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Session{
		svc:        svc,
		client:     c,
		token:      l.Token,
		renewEvery: opts.RenewEvery,
		maxWait:    opts.MaxWait,
		after:      after,
		ctx:        sctx,
		cancel:     cancel,
		lease:      *l,
		lost:       make(chan struct{}),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	go s.run()
	return s, nil
}

// Token returns the session's token. It is fixed for the session's life:
// renewal keeps the fence.
func (s *Session) Token() Token { return s.token }

// Lease returns the latest lease; its Deadline moves with each renewal.
func (s *Session) Lease() Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// Lost returns a channel closed, once and for good, when a renewal is
// refused, the holder's own send-anchored Deadline passes unrenewed, the
// client's clock fails, or the session is released.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// Err returns nil while the session holds its lease. Once Lost is closed it
// returns an error matching ErrLeaseLost that says why.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Release stops renewing (waiting for a renewal in flight to end, which
// cancelling it makes prompt), closes Lost, then releases the lease through
// the service and returns its answer. It may be called after loss: a lease
// the holder gave up on its own deadline may still be live at the
// coordinator, and releasing it frees the resource sooner. If ctx ends
// before the renewing goroutine has returned, Release returns ctx.Err()
// without releasing; call it again to finish.
func (s *Session) Release(ctx context.Context) (ReleaseOutcome, error) {
	if ctx == nil {
		return ReleaseOutcome{}, fmt.Errorf("%w: Release with a nil context", ErrInvalidRequest)
	}
	s.stopOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-ctx.Done():
		return ReleaseOutcome{}, ctx.Err()
	}
	s.lose(fmt.Errorf("%w: %v released by its holder", ErrLeaseLost, s.token))
	return s.svc.Release(ctx, s.token)
}

// lose records why the session ended and closes Lost, the first time only.
func (s *Session) lose(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.lost)
	}
}

type renewResult struct {
	req RenewRequest
	out RenewOutcome
	err error
}

// run renews the lease until it is stopped or lost. It owns at most one
// renewal goroutine at a time and waits for it before returning, so nothing
// the session started outlives it.
func (s *Session) run() {
	defer close(s.done)
	results := make(chan renewResult, 1)
	inFlight := false
	defer func() {
		s.cancel()
		if inFlight {
			<-results
		}
	}()

	lease := s.Lease()
	left, err := s.until(lease.Deadline)
	if err != nil {
		s.lose(err)
		return
	}
	deadline := s.timer(left)
	untilRenew, err := s.until(s.renewAt(lease))
	if err != nil {
		s.lose(err)
		return
	}
	renewDue := s.timer(untilRenew)
	var backoff time.Duration
	for {
		select {
		case <-s.stop:
			return
		case <-deadline:
			// Timers run on real time; the client's clock decides. A clock
			// slower than real time sends us back to wait the rest.
			left, err := s.until(lease.Deadline)
			if err != nil {
				s.lose(err)
				return
			}
			if left <= 0 {
				s.lose(fmt.Errorf("%w: %v: deadline %v passed unrenewed", ErrLeaseLost, s.token, lease.Deadline))
				return
			}
			deadline = s.after(left)
		case <-renewDue:
			renewDue = nil
			req, err := s.client.BeginRenewal(&lease)
			if err != nil {
				s.lose(fmt.Errorf("%w: %v: %w", ErrLeaseLost, s.token, err))
				return
			}
			inFlight = true
			go func() {
				out, err := s.svc.Renew(s.ctx, req)
				results <- renewResult{req: req, out: out, err: err}
			}()
		case r := <-results:
			inFlight = false
			switch {
			case errors.Is(r.err, ErrInvalidRequest):
				s.lose(fmt.Errorf("%w: %v: %w", ErrLeaseLost, s.token, r.err))
				return
			case r.err != nil:
				// No answer: try again soon, with a new send instant. The
				// deadline timer still runs and decides loss.
				backoff = nextBackoff(backoff, s.retryLimit(lease))
				renewDue = s.timer(jitter(backoff, s.retryLimit(lease)))
				continue
			case !r.out.OK:
				s.lose(fmt.Errorf("%w: %v: renewal refused: %s", ErrLeaseLost, s.token, r.out.Reason))
				return
			}
			backoff = 0
			renewed, err := s.client.CompleteRenewal(r.req, r.out.Grant)
			if err != nil {
				s.lose(fmt.Errorf("%w: %v: %w", ErrLeaseLost, s.token, err))
				return
			}
			lease = *renewed
			s.mu.Lock()
			s.lease = lease
			s.mu.Unlock()
			// A renewal answered after its own deadline arms a timer that
			// has already fired: the deadline case then reports the loss.
			left, err := s.until(lease.Deadline)
			if err == nil {
				untilRenew, err = s.until(s.renewAt(lease))
			}
			if err != nil {
				s.lose(err)
				return
			}
			deadline, renewDue = s.timer(left), s.timer(untilRenew)
		}
	}
}

// renewAt is when the next renewal is due: RenewEvery after the send instant
// the lease is anchored at (Deadline - TTL, give or take the client's skew).
func (s *Session) renewAt(l Lease) Instant {
	every := s.renewEvery
	if every == 0 {
		every = l.TTL / 3
	}
	return l.Deadline.Add(every - l.TTL)
}

// retryLimit caps the backoff between failed renewals: never longer than
// MaxWait (the TTL if 0) nor than the renewal period.
func (s *Session) retryLimit(l Lease) time.Duration {
	limit := s.maxWait
	if limit == 0 {
		limit = l.TTL
	}
	every := s.renewEvery
	if every == 0 {
		every = l.TTL / 3
	}
	return min(limit, every)
}

// until returns how long remains until at on the client's clock (<= 0 once
// reached). It reads the clock once.
func (s *Session) until(at Instant) (time.Duration, error) {
	now, err := s.client.clock.Now()
	if err != nil {
		return 0, fmt.Errorf("%w: %v: client clock: %w", ErrLeaseLost, s.token, err)
	}
	left, err := at.Sub(now)
	if err != nil {
		return 0, fmt.Errorf("%w: %v: %w", ErrLeaseLost, s.token, err)
	}
	return left, nil
}

// timer returns a channel that delivers once d has passed on the client's
// clock: at once for d <= 0.
func (s *Session) timer(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return elapsed
	}
	return s.after(d)
}

// elapsed is a wait that is already over: a closed channel delivers at once.
var elapsed = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

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
