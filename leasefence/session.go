package leasefence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Session is a lease kept alive in the background by Hold. Its methods are
// safe for concurrent use. A zero Session holds no lease: its methods
// answer as for a lost one (Err, Remaining and Release with an error
// matching ErrUninitialized and ErrLeaseLost, Lost closed, Context done).
//
// Lost, Err, Context and Remaining answer about the instant they are
// called: each reads the client's clock and, if the deadline has passed,
// ends the session there and then, without waiting for the renewing
// goroutine to notice (it may not have run for a while: a process that was
// paused wakes up with timers that have not fired yet).
//
// They are advisory like Lease.HasExpired: they tell the holder to stop
// starting work. A write already in flight is refused, if it must be, by
// the resource's gate, not by the session (see Hold).
type Session struct {
	svc        Service
	client     *Client
	token      Token
	renewEvery time.Duration // HoldOptions.RenewEvery: 0 means a third of each lease's window
	maxWait    time.Duration // 0: the latest grant's TTL
	after      func(time.Duration) <-chan time.Time
	trace      *SessionTrace
	onRelease  func() error // HoldOptions.OnRelease
	releasedMu sync.Mutex   // held while onRelease runs, so it runs once

	renewCtx    context.Context    // the renewals' context: Hold's values, the renewing goroutine's life
	cancelRenew context.CancelFunc // ends a renewal in flight

	ctx       sessionContext          // Context: Hold's values, the session's life
	cancelCtx context.CancelCauseFunc // ends ctx with the reason the session ended

	mu    sync.Mutex
	lease Lease
	err   error
	// endUnreported: the session has ended and SessionTrace.End has not
	// been told yet. The hook runs outside s.mu, so whoever ends the
	// session under the lock reports it once the lock is released.
	endUnreported bool

	lost     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the renewing goroutine has returned
}

func startSession(ctx context.Context, svc Service, c *Client, l *Lease, opts HoldOptions, after func(time.Duration) <-chan time.Time) (*Session, error) {
	rctx, cancelRenew := context.WithCancel(context.WithoutCancel(ctx))
	sctx, cancelCtx := context.WithCancelCause(context.WithoutCancel(ctx))
	s := &Session{
		svc:         svc,
		client:      c,
		token:       l.Token,
		renewEvery:  opts.RenewEvery,
		maxWait:     opts.MaxWait,
		after:       after,
		trace:       opts.Trace,
		onRelease:   opts.OnRelease,
		renewCtx:    rctx,
		cancelRenew: cancelRenew,
		cancelCtx:   cancelCtx,
		lease:       *l,
		lost:        make(chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	s.ctx = sessionContext{Context: sctx, s: s}
	go s.run()
	return s, nil
}

// errZeroSession answers the methods of a zero Session, which Hold never
// returns: it holds no lease, so it is lost from the start.
var errZeroSession = fmt.Errorf("%w: a zero Session holds no lease (%w); get one from Hold or TryHold", ErrUninitialized, ErrLeaseLost)

// zeroLost and zeroCtx are the zero Session's Lost and Context: closed,
// and cancelled with errZeroSession.
var (
	zeroLost = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
	zeroCtx  = func() context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errZeroSession)
		return ctx
	}()
)

// zero reports whether s is a zero Session (startSession makes every
// channel).
func (s *Session) zero() bool { return s.lost == nil }

// Token returns the session's token. It is fixed for the session's life:
// renewal keeps the fence.
func (s *Session) Token() Token { return s.token }

// Lease returns the latest lease; its Deadline moves with each renewal.
func (s *Session) Lease() Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// TTL returns the TTL of the latest grant: what the service granted, which
// may be more than it was configured with or asked for (etcd raises a TTL
// below its minimum). The deadline and the renewal period follow it.
func (s *Session) TTL() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease.TTL
}

// Lost returns a channel closed, once and for good, when a renewal is
// refused, the holder's own send-anchored deadline passes unrenewed, the
// client's clock fails, or the session is released. The call itself reads
// the clock: a deadline already passed closes the channel before it is
// returned.
func (s *Session) Lost() <-chan struct{} {
	if s.zero() {
		return zeroLost
	}
	s.settle()
	return s.lost
}

// Err returns nil while the session holds its lease. Once it does not, it
// returns an error that matches ErrLeaseLost and says why in words, such as
// "lease on deploy-slot lost: not renewed within its 950ms deadline"; after
// Release it also matches ErrReleased. The first reason is kept. Like Lost,
// it reads the clock.
func (s *Session) Err() error {
	if s.zero() {
		return errZeroSession
	}
	s.settle()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Context returns a context that is cancelled when the session ends, by
// loss or by Release, with the session's error as its cause
// (context.Cause); work started under it stops when the lease is gone. It
// carries the values of Hold's ctx. Its Done and Err read the clock, as
// Lost does; contexts derived from it are cancelled when it is, which for a
// passed deadline is when one of these reads it or the renewing goroutine
// wakes up.
func (s *Session) Context() context.Context {
	if s.zero() {
		return zeroCtx
	}
	s.settle()
	return s.ctx
}

// Remaining returns how long the lease has left on the client's clock, or
// the session's error once it has ended. Like Lost, it reads the clock.
func (s *Session) Remaining() (time.Duration, error) {
	if s.zero() {
		return 0, errZeroSession
	}
	s.mu.Lock()
	left := s.settleLocked()
	err := s.err
	s.mu.Unlock()
	s.reportEnd()
	if err != nil {
		return 0, err
	}
	return left, nil
}

// Release stops renewing (waiting for a renewal in flight to end, which
// cancelling it makes prompt), ends the session with an error matching
// ErrReleased, then releases the lease through the service and returns its
// answer. It may be called after loss: a lease the holder gave up on its
// own deadline may still be live at the coordinator, and releasing it frees
// the resource sooner. If ctx ends before the renewing goroutine has
// returned, Release returns ctx.Err() without releasing; call it again to
// finish. A ctx that has already ended releases nothing (the in-memory
// service, etcd's client and go-redis refuse it before sending), and the
// lease stays live until it expires: release on a context of its own, not on a request's ctx that
// may have ended (Hold's own clean-up runs on ctx's values without its
// cancellation, bounded by CleanupTimeout). Once it has released, it runs
// HoldOptions.OnRelease (the first time only) and joins its error to the
// service's.
func (s *Session) Release(ctx context.Context) (ReleaseOutcome, error) {
	if ctx == nil {
		return ReleaseOutcome{}, fmt.Errorf("%w: Release with a nil context", ErrInvalidRequest)
	}
	if s.zero() {
		return ReleaseOutcome{}, errZeroSession
	}
	s.stopOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-ctx.Done():
		return ReleaseOutcome{}, ctx.Err()
	}
	s.lose(s.ended(SessionReleased, "released by its holder", nil))
	out, err := s.svc.Release(ctx, s.token)
	if cerr := s.runOnRelease(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return out, err
}

// runOnRelease runs HoldOptions.OnRelease the first time it is called.
func (s *Session) runOnRelease() error {
	s.releasedMu.Lock()
	defer s.releasedMu.Unlock()
	f := s.onRelease
	s.onRelease = nil
	if f == nil {
		return nil
	}
	return f()
}

// settle ends the session if its deadline has passed at this reading of the
// client's clock.
func (s *Session) settle() {
	s.mu.Lock()
	s.settleLocked()
	s.mu.Unlock()
	s.reportEnd()
}

// settleLocked reads the client's clock and ends the session if the lease's
// deadline has passed (or the clock fails), returning the time left. It
// reads the clock under s.mu, so a renewal cannot land between the reading
// and the verdict. The caller holds s.mu.
func (s *Session) settleLocked() time.Duration {
	if s.err != nil {
		return 0
	}
	left, err := s.lease.remaining()
	switch {
	case err != nil:
		s.loseLocked(s.ended(SessionFailed, "lost: the client's clock failed", err))
	case left <= 0:
		s.loseLocked(s.ended(SessionExpired, fmt.Sprintf("lost: not renewed within its %v deadline", s.lease.TTL-s.client.skew), nil))
	}
	return left
}

// lose ends the session with err, the first time only.
func (s *Session) lose(err error) {
	s.mu.Lock()
	s.loseLocked(err)
	s.mu.Unlock()
	s.reportEnd()
}

// loseLocked records why the session ended, closes Lost and cancels
// Context, the first time only. The caller holds s.mu. Cancelling a
// context of the standard library runs no code of ours, so doing it under
// the lock cannot deadlock.
func (s *Session) loseLocked(err error) {
	if s.err == nil {
		s.err = err
		close(s.lost)
		s.cancelCtx(err)
		s.endUnreported = s.trace != nil && s.trace.End != nil
	}
}

// reportEnd tells SessionTrace.End that the session ended, once, after
// the lock under which it ended was released. The caller does not hold
// s.mu.
func (s *Session) reportEnd() {
	s.mu.Lock()
	if !s.endUnreported {
		s.mu.Unlock()
		return
	}
	s.endUnreported = false
	err := s.err
	s.mu.Unlock()
	info := SessionEndInfo{Token: s.token, Err: err}
	if end, ok := err.(*sessionEnd); ok {
		info.Reason = end.why
	}
	s.trace.End(info)
}

// ended is the error of a session that ended for why, in the way what
// says.
func (s *Session) ended(why SessionEndReason, what string, cause error) error {
	return &sessionEnd{token: s.token, why: why, what: what, err: cause}
}

// sessionEnd says, in words, why a session ended.
type sessionEnd struct {
	token Token
	why   SessionEndReason
	what  string // "lost: ...", or "released by its holder"
	err   error  // what went wrong underneath, if anything
}

func (e *sessionEnd) Error() string {
	msg := fmt.Sprintf("lease on %s %s (holder %s, fence %d)", e.token.Resource, e.what, e.token.Holder, e.token.Fence)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

// Is makes every session end match ErrLeaseLost, and a release ErrReleased.
func (e *sessionEnd) Is(target error) bool {
	return target == ErrLeaseLost || e.why == SessionReleased && target == ErrReleased
}

func (e *sessionEnd) Unwrap() error { return e.err }

// sessionContext is Session.Context: a cancel-cause context of the
// standard library whose Done and Err first read the session's clock.
// Value goes to the embedded context, which is how context.Cause finds
// the reason and how contexts derived from it attach to it directly.
type sessionContext struct {
	context.Context
	s *Session
}

func (c sessionContext) Done() <-chan struct{} {
	c.s.settle()
	return c.Context.Done()
}

func (c sessionContext) Err() error {
	c.s.settle()
	return c.Context.Err()
}

func (c sessionContext) String() string {
	return fmt.Sprintf("leasefence session context of %v", c.s.token)
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
		s.cancelRenew()
		if inFlight {
			<-results
		}
	}()

	lease := s.Lease()
	deadline, renewDue, ok := s.arm(lease)
	if !ok {
		return
	}
	var backoff time.Duration
	for {
		select {
		case <-s.stop:
			return
		case <-s.lost: // ended by a read (Lost, Err, ...) that found the deadline passed
			return
		case <-deadline:
			// Timers run on real time; the client's clock decides. A clock
			// slower than real time sends us back to wait the rest.
			s.mu.Lock()
			left := s.settleLocked()
			s.mu.Unlock()
			if left <= 0 {
				return
			}
			deadline = s.after(left)
		case <-renewDue:
			renewDue = nil
			req, err := s.client.BeginRenewal(&lease)
			if err != nil {
				s.lose(s.ended(SessionFailed, "lost: its renewal could not be sent", err))
				return
			}
			inFlight = true
			go func() {
				out, err := s.svc.Renew(s.renewCtx, req)
				results <- renewResult{req: req, out: out, err: err}
			}()
		case r := <-results:
			inFlight = false
			switch {
			case errors.Is(r.err, ErrInvalidRequest):
				s.lose(s.ended(SessionFailed, "lost: its renewal was refused as malformed", r.err))
				return
			case r.err != nil:
				// No answer: try again soon, with a new send instant. The
				// deadline timer still runs and decides loss.
				limit := s.retryLimit(lease)
				backoff = nextBackoff(backoff, limit)
				renewDue = s.timer(jitter(backoff, limit))
				continue
			case !r.out.OK:
				s.lose(s.ended(SessionRefused, fmt.Sprintf("lost: its renewal was refused: %s", r.out.Reason), nil))
				return
			}
			backoff = 0
			renewed, err := s.client.CompleteRenewal(r.req, r.out.Grant)
			if err != nil {
				s.lose(s.ended(SessionFailed, "lost: its renewal's answer did not match", err))
				return
			}
			if !s.install(*renewed) {
				return
			}
			lease = *renewed
			if deadline, renewDue, ok = s.arm(lease); !ok {
				return
			}
		}
	}
}

// install makes l the session's lease, unless the session has ended
// meanwhile (a read found the old deadline passed): an end is for good.
func (s *Session) install(l Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.lease = l
	return true
}

// arm returns the timers of lease l: its deadline and its next renewal,
// RenewEvery after the send instant l is anchored at. It ends the session
// and returns false if the clock fails or l leaves no room to renew.
func (s *Session) arm(l Lease) (deadline, renewDue <-chan time.Time, ok bool) {
	every, err := renewPeriod(s.renewEvery, &l, s.client.skew)
	if err != nil {
		s.lose(s.ended(SessionFailed, "lost: its renewed lease leaves no room to renew", err))
		return nil, nil, false
	}
	left, err := l.remaining()
	if err != nil {
		s.lose(s.ended(SessionFailed, "lost: the client's clock failed", err))
		return nil, nil, false
	}
	if left <= 0 {
		// A renewal answered after the deadline it earned: lost, and no
		// renewal is sent for it.
		s.settle()
		return nil, nil, false
	}
	// The send instant: Deadline = sentAt + TTL - skew, so the renewal is
	// due at sentAt + every = Deadline - (window - every).
	untilRenew := left - (l.TTL - s.client.skew - every)
	return s.timer(left), s.timer(untilRenew), true
}

// retryLimit caps the backoff between failed renewals: never longer than
// MaxWait (the TTL if 0) nor than the renewal period.
func (s *Session) retryLimit(l Lease) time.Duration {
	limit := s.maxWait
	if limit == 0 {
		limit = l.TTL
	}
	every, err := renewPeriod(s.renewEvery, &l, s.client.skew)
	if err != nil {
		return limit
	}
	return min(limit, every)
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
