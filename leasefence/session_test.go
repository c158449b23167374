package leasefence_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// manualTime drives a coordinator clock and a client clock together and
// gives sessions timers on them (HoldOptions.After): a timer fires when the
// test advances the clocks past it, never on its own.
type manualTime struct {
	coord, client *leasefence.ManualClock

	mu      sync.Mutex
	waiters []manualWaiter
	armed   int // timers ever asked for
	cond    *sync.Cond
}

type manualWaiter struct {
	at leasefence.Instant
	ch chan time.Time
}

func newManualTime() *manualTime {
	m := &manualTime{
		coord:  leasefence.NewManualClock("coordinator"),
		client: leasefence.NewManualClock("agent"),
	}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// After is HoldOptions.After on the client's clock.
func (m *manualTime) After(d time.Duration) <-chan time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, _ := m.client.Now()
	ch := make(chan time.Time, 1)
	m.waiters = append(m.waiters, manualWaiter{at: now.Add(d), ch: ch})
	m.armed++
	m.cond.Broadcast()
	return ch
}

// Advance moves both clocks by d and fires every timer now due.
func (m *manualTime) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.coord.Advance(d)
	m.client.Advance(d)
	now, _ := m.client.Now()
	kept := m.waiters[:0]
	for _, w := range m.waiters {
		if left, _ := w.at.Sub(now); left <= 0 {
			w.ch <- time.Time{}
			continue
		}
		kept = append(kept, w)
	}
	m.waiters = kept
}

// waitArmed blocks until n timers have been asked for in all: the session
// has reached the wait after the step the test is waiting on.
func (m *manualTime) waitArmed(t *testing.T, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		m.mu.Lock()
		for m.armed < n {
			m.cond.Wait()
		}
		m.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		m.mu.Lock()
		armed := m.armed
		m.mu.Unlock()
		// The waiting goroutine is left blocked; the test is failing anyway.
		t.Fatalf("waited for %d timers, only %d were armed", n, armed)
	}
}

// countingService counts calls and lets a test break a Service.
type countingService struct {
	svc leasefence.Service

	acquires, renews, releases atomic.Int64
	// dropAcquireReplies loses the reply of that many acquires (the
	// coordinator acts, the caller gets an error).
	dropAcquireReplies atomic.Int64
	failRenews         atomic.Bool // renewals get no answer at all
}

var errNoReply = errors.New("test: reply lost")

func (s *countingService) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	s.acquires.Add(1)
	out, err := s.svc.Acquire(ctx, req)
	if err == nil && s.dropAcquireReplies.Add(-1) >= 0 {
		return leasefence.AcquireOutcome{}, errNoReply
	}
	return out, err
}

func (s *countingService) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	s.renews.Add(1)
	if s.failRenews.Load() {
		return leasefence.RenewOutcome{}, errNoReply
	}
	return s.svc.Renew(ctx, req)
}

func (s *countingService) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	s.releases.Add(1)
	return s.svc.Release(ctx, t)
}

// sessionFixture is a coordinator with a 3 s TTL and a client on manual time.
type sessionFixture struct {
	time   *manualTime
	coord  *leasefence.Coordinator
	svc    *countingService
	client *leasefence.Client
}

func newSessionFixture(t *testing.T) *sessionFixture {
	t.Helper()
	m := newManualTime()
	coord := newCoordinator(t, m.coord, 3*time.Second)
	return &sessionFixture{
		time:   m,
		coord:  coord,
		svc:    &countingService{svc: leasefence.Local(coord)},
		client: newClient(t, m.client, "agent-a", 0),
	}
}

func (f *sessionFixture) hold(t *testing.T, opts leasefence.HoldOptions) *leasefence.Session {
	t.Helper()
	opts.After = f.time.After
	s, err := leasefence.Hold(t.Context(), f.svc, f.client, "r", opts)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	t.Cleanup(func() { _, _ = s.Release(context.Background()) })
	return s
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not closed after 5s", what)
	}
}

func TestSessionRenewsBeyondTheTTLAndReleases(t *testing.T) {
	f := newSessionFixture(t)
	s := f.hold(t, leasefence.HoldOptions{})
	first := s.Lease()
	if first.Token.Fence != 1 || first.TTL != 3*time.Second || s.Token() != first.Token {
		t.Fatalf("lease = %+v, token %v", first, s.Token())
	}
	// Each renewal arms two timers: the new deadline and the next renewal.
	armed := 2
	for i := 1; i <= 6; i++ {
		f.time.waitArmed(t, armed)
		f.time.Advance(time.Second) // RenewEvery 0: a third of the TTL
		armed += 2
		f.time.waitArmed(t, armed)
		l := s.Lease()
		want := leasefence.At("agent", time.Duration(i)*time.Second+3*time.Second)
		if l.Deadline != want || l.Token != first.Token {
			t.Fatalf("after renewal %d: lease %+v, want deadline %v and token %v", i, l, want, first.Token)
		}
	}
	if isClosed(s.Lost()) || s.Err() != nil {
		t.Fatalf("lost while renewed: %v", s.Err())
	}
	if got := f.svc.renews.Load(); got != 6 {
		t.Fatalf("%d renewals, want 6", got)
	}

	out, err := s.Release(t.Context())
	if err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	if !isClosed(s.Lost()) || !errors.Is(s.Err(), leasefence.ErrLeaseLost) || !strings.Contains(s.Err().Error(), "released") {
		t.Fatalf("after Release: lost %v, err %v", isClosed(s.Lost()), s.Err())
	}
	// The resource is free: another holder gets a higher fence.
	other := newClient(t, f.time.client, "agent-b", 0)
	l, _ := acquireLease(t, other, f.coord, "r")
	if l.Token.Fence != 2 {
		t.Fatalf("next fence = %d, want 2", l.Token.Fence)
	}
}

func TestSessionLostWhenRenewalRefused(t *testing.T) {
	f := newSessionFixture(t)
	s := f.hold(t, leasefence.HoldOptions{})
	f.time.waitArmed(t, 2)
	// Someone else (an operator, a stale copy of the token) releases it.
	if out, err := f.coord.Release(s.Token()); err != nil || !out.OK {
		t.Fatalf("Release behind the session's back = %+v, %v", out, err)
	}
	f.time.Advance(time.Second)
	waitClosed(t, s.Lost(), "Lost after a refused renewal")
	err := s.Err()
	if !errors.Is(err, leasefence.ErrLeaseLost) || !strings.Contains(err.Error(), string(leasefence.ReasonReleased)) {
		t.Fatalf("Err = %v, want ErrLeaseLost saying %q", err, leasefence.ReasonReleased)
	}
	// Release after loss still answers (here: already released) and keeps
	// the first reason.
	out, rerr := s.Release(t.Context())
	if rerr != nil || out.OK || out.Reason != leasefence.ReasonReleased {
		t.Fatalf("Release after loss = %+v, %v", out, rerr)
	}
	if s.Err() != err {
		t.Fatalf("Err changed from %v to %v", err, s.Err())
	}
}

func TestSessionLostExactlyAtItsOwnDeadline(t *testing.T) {
	f := newSessionFixture(t)
	s := f.hold(t, leasefence.HoldOptions{RenewEvery: time.Second, MaxWait: 10 * time.Second})
	deadline := s.Lease().Deadline
	f.svc.failRenews.Store(true)
	f.time.waitArmed(t, 2)
	// The renewal at 1 s fails; the retries back off (1/16 of RenewEvery,
	// doubling, jittered by at most a quarter: every one of the first three
	// is due within 400 ms) and fail too: none of it moves the deadline.
	f.time.Advance(time.Second)
	f.time.waitArmed(t, 3)
	for armed := 4; armed <= 6; armed++ {
		f.time.Advance(400 * time.Millisecond)
		f.time.waitArmed(t, armed)
	}
	now, _ := f.time.client.Now()
	left, _ := deadline.Sub(now)
	if left <= 0 {
		t.Fatalf("test advanced past the deadline already (%v left)", left)
	}
	f.time.Advance(left - time.Nanosecond)
	if isClosed(s.Lost()) {
		t.Fatalf("lost %v before its deadline: %v", time.Nanosecond, s.Err())
	}
	f.time.Advance(time.Nanosecond)
	waitClosed(t, s.Lost(), "Lost at the deadline")
	if err := s.Err(); !errors.Is(err, leasefence.ErrLeaseLost) || !strings.Contains(err.Error(), "not renewed within its 3s deadline") {
		t.Fatalf("Err = %v", err)
	}
	if n := f.svc.renews.Load(); n < 4 {
		t.Fatalf("%d renewal attempts before the deadline, want at least 4", n)
	}
}

func TestHoldWaitsOutAHolder(t *testing.T) {
	f := newSessionFixture(t)
	a := newClient(t, f.time.client, "agent-b", 0)
	first, _ := acquireLease(t, a, f.coord, "r") // held for 3 s, never renewed

	type result struct {
		s   *leasefence.Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := leasefence.Hold(t.Context(), f.svc, f.client, "r", leasefence.HoldOptions{After: f.time.After})
		done <- result{s, err}
	}()
	// MaxWait 0 is one second before any grant: the 3 s RetryAfter is capped,
	// so Hold asks again at most a second (and at least 3/4 s) later: at 0,
	// 1 and 2 s it is told "held", at 3 s the lease has expired.
	for armed := 1; armed <= 3; armed++ {
		f.time.waitArmed(t, armed)
		f.time.Advance(time.Second)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Hold: %v", r.err)
		}
		defer r.s.Release(context.Background())
		if r.s.Token().Fence <= first.Token.Fence {
			t.Fatalf("fence %d after %d", r.s.Token().Fence, first.Token.Fence)
		}
		if n := f.svc.acquires.Load(); n != 4 {
			t.Fatalf("%d acquire attempts, want 4 (held at 0, 1, 2 s; granted at 3 s)", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Hold never acquired after the lease expired (%d acquires)", f.svc.acquires.Load())
	}
}

func TestHoldResendsTheSameRequestAfterALostReply(t *testing.T) {
	f := newSessionFixture(t)
	f.svc.dropAcquireReplies.Store(2)
	done := make(chan *leasefence.Session, 1)
	go func() {
		s, err := leasefence.Hold(t.Context(), f.svc, f.client, "r", leasefence.HoldOptions{After: f.time.After})
		if err != nil {
			t.Errorf("Hold: %v", err)
		}
		done <- s
	}()
	f.time.waitArmed(t, 1)
	f.time.Advance(time.Second)
	f.time.waitArmed(t, 2)
	f.time.Advance(time.Second)
	s := <-done
	if s == nil {
		return
	}
	defer s.Release(context.Background())
	if s.Token().Fence != 1 || f.coord.IssuedFence() != 1 {
		t.Fatalf("fence %d, issued %d: a lost reply burned a fence", s.Token().Fence, f.coord.IssuedFence())
	}
	// The lease is anchored at the FIRST send, 2 s ago, so its renewal
	// (due 1 s after that send) is already late: the session renews at once,
	// before any timer fires, and the deadline becomes now + TTL. Timers
	// armed: two backoffs, the first deadline, then the renewed deadline and
	// the next renewal.
	f.time.waitArmed(t, 5)
	if got, want := s.Lease().Deadline, leasefence.At("agent", 5*time.Second); got != want || f.svc.renews.Load() != 1 {
		t.Fatalf("deadline %v after %d renewals, want %v after 1", got, f.svc.renews.Load(), want)
	}
}

func TestHoldCtxBoundsOnlyTheAcquisition(t *testing.T) {
	f := newSessionFixture(t)
	t.Run("cancelled while waiting", func(t *testing.T) {
		b := newClient(t, f.time.client, "agent-b", 0)
		acquireLease(t, b, f.coord, "busy")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		before := f.armed() // read before Hold can arm its backoff
		go func() {
			_, err := leasefence.Hold(ctx, f.svc, f.client, "busy", leasefence.HoldOptions{After: f.time.After})
			done <- err
		}()
		f.time.waitArmed(t, before+1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Hold = %v, want context.Canceled", err)
		}
	})
	t.Run("cancelled after Hold returned", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		before := f.time.armedNow()
		s, err := leasefence.Hold(ctx, f.svc, f.client, "r", leasefence.HoldOptions{After: f.time.After})
		if err != nil {
			t.Fatalf("Hold: %v", err)
		}
		defer s.Release(context.Background())
		cancel()
		f.time.waitArmed(t, before+2)
		f.time.Advance(time.Second)
		f.time.waitArmed(t, before+4) // renewed, not stopped
		if isClosed(s.Lost()) {
			t.Fatalf("session ended with Hold's ctx: %v", s.Err())
		}
	})
}

func (m *manualTime) armedNow() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.armed
}

func (f *sessionFixture) armed() int { return f.time.armedNow() }

func TestHoldBadArguments(t *testing.T) {
	f := newSessionFixture(t)
	var nilCtx context.Context
	tests := []struct {
		name   string
		ctx    context.Context
		svc    leasefence.Service
		client *leasefence.Client
		res    string
		opts   leasefence.HoldOptions
	}{
		{"nil ctx", nilCtx, f.svc, f.client, "r", leasefence.HoldOptions{}},
		{"nil service", t.Context(), nil, f.client, "r", leasefence.HoldOptions{}},
		{"nil client", t.Context(), f.svc, nil, "r", leasefence.HoldOptions{}},
		{"empty resource", t.Context(), f.svc, f.client, "", leasefence.HoldOptions{}},
		{"negative RenewEvery", t.Context(), f.svc, f.client, "r", leasefence.HoldOptions{RenewEvery: -1}},
		{"negative MaxWait", t.Context(), f.svc, f.client, "r", leasefence.HoldOptions{MaxWait: -1}},
		{"Local(nil)", t.Context(), leasefence.Local(nil), f.client, "r", leasefence.HoldOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := leasefence.Hold(tt.ctx, tt.svc, tt.client, tt.res, tt.opts)
			if s != nil || !errors.Is(err, leasefence.ErrInvalidRequest) {
				t.Fatalf("Hold = %v, %v; want ErrInvalidRequest", s, err)
			}
		})
	}
	// Nothing is left held.
	other := newClient(t, f.time.client, "agent-b", 0)
	acquireLease(t, other, f.coord, "r")
}

func TestHoldRefusedRequest(t *testing.T) {
	svc := refusingService{reason: leasefence.ReasonRequestConflict}
	client := newClient(t, leasefence.NewManualClock("agent"), "agent-a", 0)
	_, err := leasefence.Hold(t.Context(), svc, client, "r", leasefence.HoldOptions{})
	if !errors.Is(err, leasefence.ErrHoldRefused) || !strings.Contains(err.Error(), "request-conflict") {
		t.Fatalf("Hold = %v, want ErrHoldRefused naming the reason", err)
	}
}

type refusingService struct {
	leasefence.Service
	reason leasefence.Reason
}

func (s refusingService) Acquire(context.Context, leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	return leasefence.AcquireOutcome{Reason: s.reason}, nil
}

// blockingRenewals answers acquires and releases but holds every renewal
// until its ctx ends, like a partitioned network.
type blockingRenewals struct {
	leasefence.Service
	inFlight chan struct{}
}

func (s blockingRenewals) Renew(ctx context.Context, _ leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	s.inFlight <- struct{}{}
	<-ctx.Done()
	return leasefence.RenewOutcome{}, ctx.Err()
}

// holdWithHangingRenewal holds "r" and lets time reach the first renewal,
// which hangs.
func holdWithHangingRenewal(t *testing.T, f *sessionFixture) *leasefence.Session {
	t.Helper()
	svc := blockingRenewals{Service: f.svc, inFlight: make(chan struct{}, 1)}
	s, err := leasefence.Hold(t.Context(), svc, f.client, "r", leasefence.HoldOptions{After: f.time.After})
	if err != nil {
		t.Fatal(err)
	}
	f.time.waitArmed(t, 2)
	f.time.Advance(time.Second)
	<-svc.inFlight
	return s
}

func TestSessionLostWhileARenewalHangs(t *testing.T) {
	f := newSessionFixture(t)
	s := holdWithHangingRenewal(t, f)
	f.time.Advance(2 * time.Second) // the deadline, with the renewal still unanswered
	waitClosed(t, s.Lost(), "Lost with a renewal hanging")
	// The coordinator dated its lease from the same instant (both clocks at
	// 0), so it has expired there too.
	if out, err := s.Release(t.Context()); err != nil || out.Reason != leasefence.ReasonExpired {
		t.Fatalf("Release = %+v, %v; want expired", out, err)
	}
}

func TestSessionReleaseEndsAHangingRenewal(t *testing.T) {
	f := newSessionFixture(t)
	s := holdWithHangingRenewal(t, f)
	out, err := s.Release(t.Context())
	if err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
}

func TestSessionReleaseCtx(t *testing.T) {
	f := newSessionFixture(t)
	s := f.hold(t, leasefence.HoldOptions{})
	var nilCtx context.Context
	if _, err := s.Release(nilCtx); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Release(nil) = %v", err)
	}
	if isClosed(s.Lost()) {
		t.Fatal("Release(nil) ended the session")
	}
}

// Real time, real goroutines: sessions on a monotonic clock keep their
// leases across many TTLs, report loss within their deadline when the
// service stops answering, and leave no goroutine behind.
func TestSessionRealTimeNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	// Long enough that a renewing goroutine starved by a loaded machine
	// (the race detector, parallel packages) still renews in time.
	const ttl = 400 * time.Millisecond
	coord := newCoordinator(t, leasefence.NewMonotonicClock("coordinator"), ttl)
	svc := &countingService{svc: leasefence.Local(coord)}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := newClient(t, leasefence.NewMonotonicClock("agent"), "agent", 0)
			res := string(rune('a' + i))
			s, err := leasefence.Hold(t.Context(), svc, client, res, leasefence.HoldOptions{})
			if err != nil {
				t.Errorf("Hold: %v", err)
				return
			}
			select {
			case <-s.Lost():
				t.Errorf("lost while renewing: %v", s.Err())
			case <-time.After(4 * ttl):
			}
			if out, err := s.Release(t.Context()); err != nil || !out.OK {
				t.Errorf("Release = %+v, %v", out, err)
			}
		}()
	}
	wg.Wait()

	client := newClient(t, leasefence.NewMonotonicClock("agent"), "agent", 0)
	s, err := leasefence.Hold(t.Context(), svc, client, "cut-off", leasefence.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.failRenews.Store(true)
	deadline := s.Lease().Deadline
	select {
	case <-s.Lost():
	case <-time.After(10 * ttl):
		t.Fatal("not lost 10 TTLs after renewals stopped")
	}
	if !strings.Contains(s.Err().Error(), "not renewed within") {
		t.Fatalf("Err = %v (deadline %v)", s.Err(), deadline)
	}
	_, _ = s.Release(t.Context())

	waitFor(t, func() bool { return runtime.NumGoroutine() <= before }, "goroutines back to %d (now %d)", before, runtime.NumGoroutine())
}

func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf(format, args...)
}

func TestLocalService(t *testing.T) {
	m := leasefence.NewManualClock("coordinator")
	coord := newCoordinator(t, m, time.Second)
	svc := leasefence.Local(coord)
	client := newClient(t, m, "agent-a", 0)
	req, _ := client.BeginAcquire("r")

	var nilCtx context.Context
	if _, err := svc.Acquire(nilCtx, req); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Acquire(nil ctx) = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := svc.Acquire(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(cancelled) = %v", err)
	}
	if coord.IssuedFence() != 0 {
		t.Fatal("a cancelled acquire reached the coordinator")
	}
	out, err := svc.Acquire(t.Context(), req)
	if err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	tk := out.Grant.Token
	if _, err := svc.Renew(ctx, leasefence.RenewRequest{RequestID: "x", Token: tk}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Renew(cancelled) = %v", err)
	}
	if _, err := svc.Release(nilCtx, tk); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Release(nil ctx) = %v", err)
	}
	if r, err := svc.Release(t.Context(), tk); err != nil || !r.OK {
		t.Fatalf("Release = %+v, %v", r, err)
	}
	for _, call := range []func() error{
		func() error { _, err := leasefence.Local(nil).Acquire(t.Context(), req); return err },
		func() error {
			_, err := leasefence.Local(nil).Renew(t.Context(), leasefence.RenewRequest{})
			return err
		},
		func() error { _, err := leasefence.Local(nil).Release(t.Context(), tk); return err },
	} {
		if err := call(); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Fatalf("Local(nil) call = %v", err)
		}
	}
}
