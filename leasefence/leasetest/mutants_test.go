package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// A conformance suite is only as good as the broken implementations it
// catches. Each mutant below breaks one promise the way real backends have;
// the suite, run on a recorder rather than on the test itself, must FAIL on
// it, in the subtest written for that promise, without panicking. The
// correct implementations, run the same way, must pass: the recorder does
// not fail everything.
func TestSuitesKillTheMutants(t *testing.T) {
	mutants := []struct {
		name     string
		suite    func(t tb)
		killedBy string // the subtest that must fail
	}{
		{"name-keyed release", serviceSuite(nameKeyedRelease), "ReleaseGoesByTokenNotByHolder"},
		{"resurrecting renew", serviceSuite(resurrectingRenew), "NoResurrection"},
		{"fresh grant on retry", serviceSuite(freshGrantOnRetry), "IdempotentRetry"},
		{"reply-anchored TTL", serviceSuite(replyAnchoredTTL), "GrantedTTLWithinTheLease"},
		{"takeover of a live lease", serviceSuite(takeoverOfLiveLeases), "OneLiveHolderUnderConcurrentAcquirers"},
		{"32-bit fences", gateSuite(narrowFences), "WideFences"},
		{"check-then-set gate", gateSuite(checkThenSet), "Concurrent"},
		{"refusal not logged", gateSuite(unloggedRefusals), "AdmissionRule"},
		{"readers blind to ctx", gateSuite(ctxBlind), "ReadersContexts"},
		{"lock-delay ignored", lockDelaySuite(ignoredLockDelay), "AfterExpiry"},
		{"lock-delay after a release", lockDelaySuite(lockDelayAfterRelease), "NotAfterRelease"},
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			r := newRecorder(t, "suite")
			m.suite(r)
			if panics := r.book.read(&r.book.panics); len(panics) > 0 {
				t.Errorf("the suite panicked rather than failed: %q", panics)
			}
			failed := r.book.read(&r.book.failures)
			if !slices.Contains(failed, "suite/"+m.killedBy) {
				t.Fatalf("the suite did not fail %s on the mutant; failed: %q\n%s", m.killedBy, failed, strings.Join(r.book.read(&r.book.lines), "\n"))
			}
			t.Logf("killed by %q", failed)
		})
	}
	for _, c := range []struct {
		name  string
		suite func(t tb)
	}{
		{"Local", serviceSuite(func(svc leasefence.Service, _ func(time.Duration)) leasefence.Service { return svc })},
		{"FenceGate", gateSuite(FenceGateHarness)},
		{"Local with a lock-delay", lockDelaySuite(localWithLockDelay)},
	} {
		t.Run("control "+c.name, func(t *testing.T) {
			r := newRecorder(t, "suite")
			c.suite(r)
			if failed := r.book.read(&r.book.failures); len(failed) > 0 {
				t.Fatalf("the correct implementation failed %q:\n%s", failed, strings.Join(r.book.read(&r.book.lines), "\n"))
			}
		})
	}
}

// serviceSuite runs TestService on the in-memory coordinator, on a manual
// clock, behind the service that wrap makes of it. elapse moves the clock.
func serviceSuite(wrap func(svc leasefence.Service, elapse func(time.Duration)) leasefence.Service) func(t tb) {
	return func(t tb) {
		testService(t, func(t testing.TB) Harness {
			clock := leasefence.NewManualClock("coordinator")
			const ttl = 3 * time.Second
			coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			return Harness{Service: wrap(leasefence.Local(coord), clock.Advance), TTL: ttl, Elapse: clock.Advance}
		})
	}
}

// gateSuite runs TestGate on the gate that mutate makes of a FenceGate.
func gateSuite(mutate func(g *leasefence.FenceGate) GateHarness) func(t tb) {
	return func(t tb) {
		testGate(t, func(_ testing.TB, resource string) GateHarness { return mutate(leasefence.NewFenceGate(resource)) })
	}
}

// fenceGateHarness is g under the suite, written through commit (a
// mutant's Commit).
func fenceGateHarness(g *leasefence.FenceGate, commit func(ctx context.Context, t leasefence.Token, write func(context.Context) error) error) GateHarness {
	return listHarness(leasefence.AsGate(g), commit)
}

// nameKeyedRelease releases the holder's newest lease on the resource,
// whichever of its tokens it is given: etcd's concurrency.Mutex.Unlock bug,
// which lets a holder's stale copy free the lease it holds now.
func nameKeyedRelease(svc leasefence.Service, _ func(time.Duration)) leasefence.Service {
	return &byName{Service: svc, newest: map[[2]string]leasefence.Token{}}
}

type byName struct {
	leasefence.Service
	mu     sync.Mutex
	newest map[[2]string]leasefence.Token // by resource and holder
}

func (s *byName) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	out, err := s.Service.Acquire(ctx, req)
	if err == nil && out.OK {
		s.mu.Lock()
		s.newest[[2]string{req.Resource, req.Holder}] = out.Grant.Token
		s.mu.Unlock()
	}
	return out, err
}

func (s *byName) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	s.mu.Lock()
	if newest, ok := s.newest[[2]string{t.Resource, t.Holder}]; ok {
		t = newest
	}
	s.mu.Unlock()
	return s.Service.Release(ctx, t)
}

// resurrectingRenew renews an expired lease that nobody else took, as a
// store that only checks "is anyone else holding it" would.
func resurrectingRenew(svc leasefence.Service, _ func(time.Duration)) leasefence.Service {
	return resurrecting{svc}
}

type resurrecting struct{ leasefence.Service }

func (s resurrecting) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	out, err := s.Service.Renew(ctx, req)
	if err != nil || out.OK || out.Reason != leasefence.ReasonExpired {
		return out, err
	}
	again, err := s.Service.Acquire(ctx, leasefence.AcquireRequest{RequestID: req.RequestID + "-again", Holder: req.Token.Holder, Resource: req.Token.Resource})
	if err != nil || !again.OK {
		return out, err
	}
	return leasefence.RenewOutcome{OK: true, Grant: leasefence.Grant{RequestID: req.RequestID, Token: req.Token, TTL: again.Grant.TTL}}, nil
}

// freshGrantOnRetry answers a retried acquire as a new one: a coordinator
// without idempotent retries, which burns a fence on every lost reply.
func freshGrantOnRetry(svc leasefence.Service, _ func(time.Duration)) leasefence.Service {
	return &forgetful{Service: svc}
}

type forgetful struct {
	leasefence.Service
	mu sync.Mutex
	n  int
}

func (s *forgetful) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	s.mu.Lock()
	s.n++
	suffix := fmt.Sprintf("-%d", s.n)
	s.mu.Unlock()
	req.RequestID += suffix
	out, err := s.Service.Acquire(ctx, req)
	out.Grant.RequestID = strings.TrimSuffix(out.Grant.RequestID, suffix)
	return out, err
}

// takeoverOfLiveLeases answers an acquire of a held resource by ending the
// live lease and granting a new one, as a coordinator that trusts a stale
// read of the resource does: every acquirer of a round is granted while
// the one before it still holds.
func takeoverOfLiveLeases(svc leasefence.Service, _ func(time.Duration)) leasefence.Service {
	return takeover{svc}
}

type takeover struct{ leasefence.Service }

func (s takeover) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	out, err := s.Service.Acquire(ctx, req)
	if err != nil || out.Reason != leasefence.ReasonHeld {
		return out, err
	}
	if tok, held, err := s.Service.(leasefence.HolderReader).Holder(ctx, req.Resource); err != nil || !held {
		return out, err
	} else if _, err := s.Service.Release(ctx, tok); err != nil {
		return out, err
	}
	return s.Service.Acquire(ctx, req)
}

// replyAnchoredTTL dates its leases when it processes a request but counts
// the TTL it reports from its reply, half a TTL later: the holder's
// deadline then falls after the lease is free.
func replyAnchoredTTL(svc leasefence.Service, elapse func(time.Duration)) leasefence.Service {
	return replyAnchored{Service: svc, elapse: elapse}
}

type replyAnchored struct {
	leasefence.Service
	elapse func(time.Duration)
}

func (s replyAnchored) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	out, err := s.Service.Acquire(ctx, req)
	if err == nil && out.OK {
		out.Grant.TTL += s.reply(out.Grant.TTL)
	}
	return out, err
}

func (s replyAnchored) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	out, err := s.Service.Renew(ctx, req)
	if err == nil && out.OK {
		out.Grant.TTL += s.reply(out.Grant.TTL)
	}
	return out, err
}

// reply lets the time between processing and reply pass, and returns it.
func (s replyAnchored) reply(ttl time.Duration) time.Duration {
	s.elapse(ttl / 2)
	return ttl / 2
}

// narrowFences keeps fences in 32 bits: 2^32+5 is stored, compared and
// read back as 5.
func narrowFences(g *leasefence.FenceGate) GateHarness {
	narrow := func(t leasefence.Token) leasefence.Token {
		t.Fence = leasefence.Fence(uint32(t.Fence))
		return t
	}
	h := fenceGateHarness(g, func(ctx context.Context, t leasefence.Token, write func(context.Context) error) error {
		return g.Commit(ctx, narrow(t), write)
	})
	h.Gate = admitNarrow{Gate: h.Gate, narrow: narrow}
	return h
}

type admitNarrow struct {
	leasefence.Gate
	narrow func(leasefence.Token) leasefence.Token
}

func (g admitNarrow) Admit(ctx context.Context, t leasefence.Token) error {
	return g.Gate.Admit(ctx, g.narrow(t))
}

// checkThenSet checks the floor, writes, then raises it, each step on its
// own: a committer with a higher fence can write between another's check
// and write, and the older write lands after the newer. The delay between
// check and write stands for a slow disk; it varies with the fence, so
// committers overtake each other.
func checkThenSet(g *leasefence.FenceGate) GateHarness {
	return fenceGateHarness(g, func(ctx context.Context, t leasefence.Token, write func(context.Context) error) error {
		if !g.WouldAdmit(t) {
			return g.Commit(ctx, t, write) // refused and logged, as it should be
		}
		time.Sleep(time.Duration(t.Fence%4) * 200 * time.Microsecond)
		if err := write(ctx); err != nil {
			return err
		}
		if err := g.Admit(t); err != nil && !errors.Is(err, leasefence.ErrStaleFence) {
			return err
		}
		return nil
	})
}

// unloggedRefusals refuses a stale token without logging it: the writer is
// told, but the evidence that two holders overlapped is gone.
func unloggedRefusals(g *leasefence.FenceGate) GateHarness {
	return fenceGateHarness(g, func(ctx context.Context, t leasefence.Token, write func(context.Context) error) error {
		if floor := g.Floor(); t.Resource == floor.Resource && t.Holder != "" && t.Fence < floor.Fence {
			return leasefence.RejectionError(leasefence.Rejection{
				Resource: t.Resource, Holder: t.Holder, Fence: t.Fence, FloorHolder: floor.Holder, FloorFence: floor.Fence,
			})
		}
		return g.Commit(ctx, t, write)
	})
}

// ctxBlind answers its readers whatever their ctx: a nil one does not
// panic, and an ended one still reads, as a gate that never looks at ctx.
func ctxBlind(g *leasefence.FenceGate) GateHarness {
	h := FenceGateHarness(g)
	h.Gate = blind{g}
	return h
}

type blind struct{ g *leasefence.FenceGate }

func (b blind) Resource() string { return b.g.Resource() }

func (b blind) Admit(_ context.Context, t leasefence.Token) error { return b.g.Admit(t) }

func (b blind) Floor(context.Context) (leasefence.Token, error) { return b.g.Floor(), nil }

func (b blind) RejectionsSince(_ context.Context, seq uint64) ([]leasefence.Rejection, uint64, error) {
	rs, missed := b.g.RejectionsSince(seq)
	return rs, missed, nil
}

func (b blind) RejectionCount(context.Context) (uint64, error) {
	return uint64(b.g.RejectionCount()), nil
}

// testLockDelayOf is the lock-delay the lock-delay mutants and their
// control are asked for.
const testLockDelayOf = 5 * time.Second

// lockDelaySuite runs TestLockDelay on the service that build makes on a
// manual clock, asked for a lock-delay of delay.
func lockDelaySuite(build func(clock *leasefence.ManualClock, ttl, delay time.Duration) (leasefence.Service, error)) func(t tb) {
	return func(t tb) {
		testLockDelay(t, func(t testing.TB) Harness {
			clock := leasefence.NewManualClock("coordinator")
			const ttl = 3 * time.Second
			svc, err := build(clock, ttl, testLockDelayOf)
			if err != nil {
				t.Fatal(err)
			}
			return Harness{Service: svc, TTL: ttl, Elapse: clock.Advance, LockDelay: testLockDelayOf}
		})
	}
}

func localWithLockDelay(clock *leasefence.ManualClock, ttl, delay time.Duration) (leasefence.Service, error) {
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl, LockDelay: delay})
	return leasefence.Local(coord), err
}

// ignoredLockDelay takes the option and does nothing with it: a grant
// right after an expiry, as every coordinator made before lock-delay.
func ignoredLockDelay(clock *leasefence.ManualClock, ttl, _ time.Duration) (leasefence.Service, error) {
	return localWithLockDelay(clock, ttl, 0)
}

// lockDelayAfterRelease delays the next grant after a release too, as a
// coordinator that cannot tell a release from an expiry would (an etcd
// lease left to run out its TTL rather than deleted): it costs every
// orderly hand-over the whole delay.
func lockDelayAfterRelease(clock *leasefence.ManualClock, ttl, delay time.Duration) (leasefence.Service, error) {
	svc, err := localWithLockDelay(clock, ttl, delay)
	return &delaysReleases{Service: svc, clock: clock, delay: delay, released: map[string]leasefence.Instant{}}, err
}

type delaysReleases struct {
	leasefence.Service
	clock    *leasefence.ManualClock
	delay    time.Duration
	mu       sync.Mutex
	released map[string]leasefence.Instant // by resource: when its last lease was released
}

func (s *delaysReleases) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	out, err := s.Service.Release(ctx, t)
	if err == nil && out.OK {
		now, _ := s.clock.Now()
		s.mu.Lock()
		s.released[t.Resource] = now
		s.mu.Unlock()
	}
	return out, err
}

func (s *delaysReleases) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	now, _ := s.clock.Now()
	s.mu.Lock()
	at, ok := s.released[req.Resource]
	s.mu.Unlock()
	if since, err := now.Sub(at); ok && err == nil && since < s.delay {
		return leasefence.AcquireOutcome{Reason: leasefence.ReasonLockDelay, RetryAfter: s.delay - since}, nil
	}
	return s.Service.Acquire(ctx, req)
}

// TestLockDelayOption must catch a constructor that takes any lock-delay
// (no bound, as a coordinator that forgot the rule), and pass the rule.
func TestLockDelayOptionCatchesNoBound(t *testing.T) {
	for _, c := range []struct {
		name     string
		newWith  func(delay time.Duration, allowLong bool) error
		wantFail bool
	}{
		{"no bound", func(time.Duration, bool) error { return nil }, true},
		{"negative refused, no upper bound", func(d time.Duration, _ bool) error {
			return leasefence.ValidateLockDelay("Options.LockDelay", d, true)
		}, true},
		{"the rule", func(d time.Duration, allowLong bool) error {
			return leasefence.ValidateLockDelay("Options.LockDelay", d, allowLong)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRecorder(t, "suite")
			r.run("option", func(t tb) { testLockDelayOption(t, "Options.LockDelay", c.newWith) })
			if failed := slices.Contains(r.book.read(&r.book.failures), "suite/option"); failed != c.wantFail {
				t.Fatalf("TestLockDelayOption failed: %v, want %v\n%s", failed, c.wantFail, strings.Join(r.book.read(&r.book.lines), "\n"))
			}
		})
	}
}

// A correct coordinator on a machine so slow that every acquire takes
// longer than the TTL: a lease ends before its holder hears of it, before
// the next call reaches the coordinator, and a round of acquirers gets a
// grant after each expiry, none while another's holder could still count
// on its lease. The suite must accuse it of nothing, nor judge what the
// load outran: each subtest skips.
func TestSuiteAcquitsACoordinatorSlowerThanItsTTL(t *testing.T) {
	const ttl = 20 * time.Millisecond
	for _, c := range []struct {
		name string
		fn   func(t tb, s *suite)
		// before: the pause comes before the coordinator decides (the
		// request in transit) rather than after (the reply in transit).
		before bool
	}{
		{"Held", testHeld, true},
		{"IdempotentRetry", testIdempotentRetry, true},
		{"StaleTokenNeverTouchesANewerHolder", testStaleTokenNeverTouchesNewer, true},
		{"OneLiveHolderUnderConcurrentAcquirers", testOneLiveHolder, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			svc := &slowAcquires{Service: leasefence.Local(coord), pause: ttl * 3 / 2, before: c.before}
			r := newRecorder(t, "suite")
			r.run(c.name, func(t tb) {
				c.fn(t, &suite{Harness: Harness{Service: svc, TTL: ttl, Elapse: time.Sleep}, t: t})
			})
			lines := strings.Join(r.book.read(&r.book.lines), "\n")
			if failed := r.book.read(&r.book.failures); len(failed) > 0 {
				t.Fatalf("the suite failed %q on a correct coordinator slower than its TTL:\n%s", failed, lines)
			}
			if !strings.Contains(lines, "nothing to judge") {
				t.Fatalf("the suite judged what the load outran:\n%s", lines)
			}
		})
	}
}

// slowAcquires answers one acquire at a time, each taking pause before or
// after the coordinator decides it, as on a loaded machine.
type slowAcquires struct {
	leasefence.Service
	mu     sync.Mutex
	pause  time.Duration
	before bool
}

func (s *slowAcquires) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.before {
		time.Sleep(s.pause)
		return s.Service.Acquire(ctx, req)
	}
	defer time.Sleep(s.pause)
	return s.Service.Acquire(ctx, req)
}
