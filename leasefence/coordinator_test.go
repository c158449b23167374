package leasefence_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// The coordinator tests run scripts against a coordinator whose clock is a
// ManualClock("coordinator") starting at 0 with a TTL of 1000ms, so every
// expected instant can be written down.
const testTTL = time.Second

// cstep is one step of a coordinator script.
type cstep func(t *testing.T, c *leasefence.Coordinator, clock *leasefence.ManualClock)

func advance(d time.Duration) cstep {
	return func(t *testing.T, c *leasefence.Coordinator, clock *leasefence.ManualClock) { clock.Advance(d) }
}

func acquire(id, holder, resource string, want leasefence.AcquireOutcome) cstep {
	return func(t *testing.T, c *leasefence.Coordinator, clock *leasefence.ManualClock) {
		t.Helper()
		now, _ := clock.Now()
		req := leasefence.AcquireRequest{RequestID: id, Holder: holder, Resource: resource}
		got, err := c.Acquire(req)
		if err != nil || got != want {
			t.Fatalf("at %v Acquire(%s by %s on %s)\n got %+v, %v\nwant %+v", now, id, holder, resource, got, err, want)
		}
	}
}

func renew(id string, token leasefence.Token, want leasefence.RenewOutcome) cstep {
	return func(t *testing.T, c *leasefence.Coordinator, clock *leasefence.ManualClock) {
		t.Helper()
		now, _ := clock.Now()
		got, err := c.Renew(leasefence.RenewRequest{RequestID: id, Token: token})
		if err != nil || got != want {
			t.Fatalf("at %v Renew(%s, %v)\n got %+v, %v\nwant %+v", now, id, token, got, err, want)
		}
	}
}

func release(token leasefence.Token, want leasefence.ReleaseOutcome) cstep {
	return func(t *testing.T, c *leasefence.Coordinator, clock *leasefence.ManualClock) {
		t.Helper()
		now, _ := clock.Now()
		got, err := c.Release(token)
		if err != nil || got != want {
			t.Fatalf("at %v Release(%v)\n got %+v, %v\nwant %+v", now, token, got, err, want)
		}
	}
}

func issued(want leasefence.Fence) cstep {
	return func(t *testing.T, c *leasefence.Coordinator, clock *leasefence.ManualClock) {
		t.Helper()
		if got := c.IssuedFence(); got != want {
			t.Fatalf("IssuedFence() = %d, want %d", got, want)
		}
	}
}

// grant is the grant for id of token, expiring at expiresAt on the
// coordinator's clock.
func grant(id string, token leasefence.Token, expiresAt time.Duration) leasefence.Grant {
	return leasefence.Grant{RequestID: id, Token: token, TTL: testTTL, CoordinatorExpiresAt: leasefence.At("coordinator", expiresAt)}
}

func granted(id string, token leasefence.Token, expiresAt time.Duration) leasefence.AcquireOutcome {
	return leasefence.AcquireOutcome{OK: true, Grant: grant(id, token, expiresAt)}
}

func refused(reason leasefence.Reason, heldBy string, retryAfter time.Duration) leasefence.AcquireOutcome {
	return leasefence.AcquireOutcome{Reason: reason, HeldBy: heldBy, RetryAfter: retryAfter}
}

func renewed(id string, token leasefence.Token, expiresAt time.Duration) leasefence.RenewOutcome {
	return leasefence.RenewOutcome{OK: true, Grant: grant(id, token, expiresAt)}
}

func renewRefused(reason leasefence.Reason) leasefence.RenewOutcome {
	return leasefence.RenewOutcome{Reason: reason}
}

var released = leasefence.ReleaseOutcome{OK: true}

func releaseRefused(reason leasefence.Reason) leasefence.ReleaseOutcome {
	return leasefence.ReleaseOutcome{Reason: reason}
}

func TestCoordinatorFenceOrdering(t *testing.T) {
	a1 := tok("r", "a", 1)
	b2 := tok("r", "b", 2)
	tests := []struct {
		name        string
		startFence  leasefence.Fence
		replayCache int
		steps       []cstep
	}{
		{
			name: "acquire on free mints the fence after StartFence", startFence: 41,
			steps: []cstep{
				issued(41),
				acquire("1", "a", "r", granted("1", tok("r", "a", 42), ms(1000))),
				issued(42),
				acquire("2", "b", "other", granted("2", tok("other", "b", 43), ms(1000))),
				issued(43),
			},
		},
		{
			name: "fences are one counter across resources",
			steps: []cstep{
				acquire("1", "a", "r1", granted("1", tok("r1", "a", 1), ms(1000))),
				advance(ms(10)),
				acquire("2", "a", "r2", granted("2", tok("r2", "a", 2), ms(1010))),
				acquire("3", "b", "r3", granted("3", tok("r3", "b", 3), ms(1010))),
				issued(3),
			},
		},
		{
			name: "held until exactly the expiry instant",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(999)),
				acquire("2", "b", "r", refused(leasefence.ReasonHeld, "a", ms(1))),
				advance(ms(1)),
				// Expired at its expiry instant: b gets a higher fence.
				acquire("3", "b", "r", granted("3", b2, ms(2000))),
				issued(2),
			},
		},
		{
			name: "renew one tick before expiry succeeds, at expiry it is expired",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(999)),
				renew("r1", a1, renewed("r1", a1, ms(1999))),
				advance(ms(1000)),
				renew("r2", a1, renewRefused(leasefence.ReasonExpired)),
				issued(1),
			},
		},
		{
			name: "renewal keeps the fence and extends to reading plus TTL",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(400)),
				renew("r1", a1, renewed("r1", a1, ms(1400))),
				advance(ms(900)),
				acquire("2", "b", "r", refused(leasefence.ReasonHeld, "a", ms(100))),
				renew("r2", a1, renewed("r2", a1, ms(2300))),
				issued(1),
				advance(ms(1000)),
				acquire("3", "b", "r", granted("3", b2, ms(3300))),
			},
		},
		{
			name: "expiry then acquisition mints a higher fence, also for the same holder",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(1500)),
				acquire("2", "a", "r", granted("2", tok("r", "a", 2), ms(2500))),
				advance(ms(1000)),
				acquire("3", "b", "r", granted("3", tok("r", "b", 3), ms(3500))),
				issued(3),
			},
		},
		{
			name: "release frees at once and the next acquisition mints a higher fence",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(100)),
				release(a1, released),
				acquire("2", "b", "r", granted("2", b2, ms(1100))),
				acquire("3", "a", "r", refused(leasefence.ReasonHeld, "b", ms(1000))),
				release(b2, released),
				acquire("4", "a", "r", granted("4", tok("r", "a", 3), ms(1100))),
				issued(3),
			},
		},
		{
			name: "an expired lease is never resurrected, even when nobody took it",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(1000)),
				renew("r1", a1, renewRefused(leasefence.ReasonExpired)),
				advance(ms(5000)),
				renew("r2", a1, renewRefused(leasefence.ReasonExpired)),
				release(a1, releaseRefused(leasefence.ReasonExpired)),
				issued(1),
				acquire("2", "a", "r", granted("2", tok("r", "a", 2), ms(7000))),
				renew("r3", a1, renewRefused(leasefence.ReasonSuperseded)),
			},
		},
		{
			name: "already-held: no second lease for the holder",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(300)),
				acquire("2", "a", "r", refused(leasefence.ReasonAlreadyHeld, "a", ms(700))),
				issued(1),
				// The holder's lease is untouched: it still renews under fence 1.
				renew("r1", a1, renewed("r1", a1, ms(1300))),
			},
		},
		{
			name: "held: HeldBy and RetryAfter = expiry - now",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				acquire("2", "b", "r", refused(leasefence.ReasonHeld, "a", ms(1000))),
				advance(ms(250)),
				acquire("3", "c", "r", refused(leasefence.ReasonHeld, "a", ms(750))),
				renew("r1", a1, renewed("r1", a1, ms(1250))),
				advance(ms(1)),
				acquire("4", "b", "r", refused(leasefence.ReasonHeld, "a", ms(999))),
				issued(1),
			},
		},
		{
			name: "a retried request gets the original grant and burns no fence",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(500)),
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				issued(1),
				renew("r1", a1, renewed("r1", a1, ms(1500))),
				advance(ms(200)),
				// Still the original grant, renewal or not.
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				issued(1),
				// A new id for the same holder is not a retry.
				acquire("2", "a", "r", refused(leasefence.ReasonAlreadyHeld, "a", ms(800))),
			},
		},
		{
			name: "stale-request once the lease expired",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(1000)),
				acquire("1", "a", "r", refused(leasefence.ReasonStaleRequest, "", 0)),
				issued(1),
			},
		},
		{
			name: "stale-request once the lease was released",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				release(a1, released),
				acquire("1", "a", "r", refused(leasefence.ReasonStaleRequest, "", 0)),
				issued(1),
			},
		},
		{
			name: "stale-request once the lease was superseded",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(1000)),
				acquire("2", "b", "r", granted("2", b2, ms(2000))),
				acquire("1", "a", "r", refused(leasefence.ReasonStaleRequest, "", 0)),
				acquire("2", "b", "r", granted("2", b2, ms(2000))),
				issued(2),
			},
		},
		{
			name: "stale-request once superseded by the same holder",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				release(a1, released),
				acquire("2", "a", "r", granted("2", tok("r", "a", 2), ms(1000))),
				acquire("1", "a", "r", refused(leasefence.ReasonStaleRequest, "", 0)),
				issued(2),
			},
		},
		{
			name: "request-conflict: the id reused by another holder",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				acquire("1", "b", "r", refused(leasefence.ReasonRequestConflict, "", 0)),
				advance(ms(1000)),
				// Still a conflict once the lease is gone: the id is a's.
				acquire("1", "b", "r", refused(leasefence.ReasonRequestConflict, "", 0)),
				issued(1),
			},
		},
		{
			name: "request-conflict: the id reused for another resource, even a free one",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				acquire("1", "a", "free", refused(leasefence.ReasonRequestConflict, "", 0)),
				issued(1),
				acquire("2", "a", "free", granted("2", tok("free", "a", 2), ms(1000))),
			},
		},
		{
			name: "replay cache eviction: an evicted retry is a fresh acquisition and burns a fence", replayCache: 2,
			steps: []cstep{
				acquire("1", "a", "r1", granted("1", tok("r1", "a", 1), ms(1000))),
				acquire("2", "a", "r2", granted("2", tok("r2", "a", 2), ms(1000))),
				acquire("1", "a", "r1", granted("1", tok("r1", "a", 1), ms(1000))), // remembered
				acquire("3", "a", "r3", granted("3", tok("r3", "a", 3), ms(1000))), // evicts 1
				// While r1 is live the evicted retry is just another acquire.
				acquire("1", "a", "r1", refused(leasefence.ReasonAlreadyHeld, "a", ms(1000))),
				advance(ms(1000)),
				acquire("2", "a", "r2", refused(leasefence.ReasonStaleRequest, "", 0)), // still remembered
				issued(3),
				acquire("1", "a", "r1", granted("1", tok("r1", "a", 4), ms(2000))), // evicted: fresh, fence burned
				issued(4),
				// It is now remembered again (and evicted 2).
				acquire("1", "a", "r1", granted("1", tok("r1", "a", 4), ms(2000))),
				acquire("2", "b", "r2", granted("2", tok("r2", "b", 5), ms(2000))), // no conflict: 2 was forgotten
				issued(5),
			},
		},
		{
			name: "renew and release: superseded",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(1000)),
				acquire("2", "b", "r", granted("2", b2, ms(2000))),
				renew("r1", a1, renewRefused(leasefence.ReasonSuperseded)),
				release(a1, releaseRefused(leasefence.ReasonSuperseded)),
				// b's lease is untouched.
				renew("r2", b2, renewed("r2", b2, ms(2000))),
				release(b2, released),
				// A released lease that was then superseded is superseded.
				acquire("3", "c", "r", granted("3", tok("r", "c", 3), ms(2000))),
				renew("r3", b2, renewRefused(leasefence.ReasonSuperseded)),
				release(a1, releaseRefused(leasefence.ReasonSuperseded)),
			},
		},
		{
			name: "renew and release: released",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				release(a1, released),
				renew("r1", a1, renewRefused(leasefence.ReasonReleased)),
				release(a1, releaseRefused(leasefence.ReasonReleased)),
				advance(ms(5000)),
				renew("r2", a1, renewRefused(leasefence.ReasonReleased)),
				issued(1),
			},
		},
		{
			name: "renew and release: unknown",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				// A resource the coordinator never leased.
				renew("r1", tok("never", "a", 1), renewRefused(leasefence.ReasonUnknown)),
				release(tok("never", "a", 1), releaseRefused(leasefence.ReasonUnknown)),
				// A fence higher than any issued for the resource.
				renew("r2", tok("r", "a", 2), renewRefused(leasefence.ReasonUnknown)),
				release(tok("r", "a", 2), releaseRefused(leasefence.ReasonUnknown)),
				// The current fence under another holder.
				renew("r3", tok("r", "b", 1), renewRefused(leasefence.ReasonUnknown)),
				release(tok("r", "b", 1), releaseRefused(leasefence.ReasonUnknown)),
				// None of that touched a's lease.
				renew("r4", a1, renewed("r4", a1, ms(1000))),
				acquire("2", "b", "r", refused(leasefence.ReasonHeld, "a", ms(1000))),
				// Another holder's claim to the current fence stays unknown
				// after expiry and after release.
				advance(ms(1000)),
				renew("r5", tok("r", "b", 1), renewRefused(leasefence.ReasonUnknown)),
				issued(1),
			},
		},
		{
			name: "release of an expired lease is expired and frees nothing new",
			steps: []cstep{
				acquire("1", "a", "r", granted("1", a1, ms(1000))),
				advance(ms(1000)),
				release(a1, releaseRefused(leasefence.ReasonExpired)),
				acquire("2", "b", "r", granted("2", b2, ms(2000))),
				release(a1, releaseRefused(leasefence.ReasonSuperseded)),
				acquire("3", "a", "r", refused(leasefence.ReasonHeld, "b", ms(1000))),
			},
		},
		{
			name: "resources are independent",
			steps: []cstep{
				acquire("1", "a", "r1", granted("1", tok("r1", "a", 1), ms(1000))),
				advance(ms(500)),
				acquire("2", "b", "r2", granted("2", tok("r2", "b", 2), ms(1500))),
				acquire("3", "b", "r1", refused(leasefence.ReasonHeld, "a", ms(500))),
				acquire("4", "a", "r2", refused(leasefence.ReasonHeld, "b", ms(1000))),
				release(tok("r1", "a", 1), released),
				renew("r1", tok("r2", "b", 2), renewed("r1", tok("r2", "b", 2), ms(1500))),
				acquire("5", "b", "r1", granted("5", tok("r1", "b", 3), ms(1500))),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := leasefence.NewManualClock("coordinator")
			c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
				Clock: clock, TTL: testTTL, StartFence: tt.startFence, ReplayCache: tt.replayCache,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, step := range tt.steps {
				step(t, c, clock)
			}
		})
	}
}

func TestCoordinatorReplayCacheDefault(t *testing.T) {
	if leasefence.DefaultReplayCache != 1024 {
		t.Fatalf("DefaultReplayCache = %d, the contract says 0 means 1024", leasefence.DefaultReplayCache)
	}
	clock := leasefence.NewManualClock("coordinator")
	c := newCoordinator(t, clock, testTTL)
	// 1025 grants on 1025 resources: the first is evicted by the last.
	for n := range 1025 {
		id := fmt.Sprint("id-", n)
		if out, err := c.Acquire(leasefence.AcquireRequest{RequestID: id, Holder: "a", Resource: id}); err != nil || !out.OK {
			t.Fatalf("Acquire %d = %+v, %v", n, out, err)
		}
	}
	// id-1 is the oldest still remembered: replayed.
	out, _ := c.Acquire(leasefence.AcquireRequest{RequestID: "id-1", Holder: "a", Resource: "id-1"})
	if !out.OK || out.Grant.Token.Fence != 2 {
		t.Errorf("retry of id-1 = %+v, want the original grant with fence 2", out)
	}
	// id-0 was evicted: its retry is a fresh acquire of a live lease.
	out, _ = c.Acquire(leasefence.AcquireRequest{RequestID: "id-0", Holder: "a", Resource: "id-0"})
	if out != refused(leasefence.ReasonAlreadyHeld, "a", testTTL) {
		t.Errorf("retry of evicted id-0 = %+v, want already-held", out)
	}
}

// TestCoordinatorReplayCacheWraps checks the replay cache after its ring
// has wrapped more than once: each remembered request id replays its own
// grant, and each evicted one is a fresh acquire again.
func TestCoordinatorReplayCacheWraps(t *testing.T) {
	clock := leasefence.NewManualClock("coordinator")
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: testTTL, ReplayCache: 3})
	if err != nil {
		t.Fatal(err)
	}
	const grants = 8
	for n := range grants {
		id := fmt.Sprint("id-", n)
		if out, err := c.Acquire(leasefence.AcquireRequest{RequestID: id, Holder: "a", Resource: id}); err != nil || !out.OK {
			t.Fatalf("Acquire %d = %+v, %v", n, out, err)
		}
	}
	for n := range grants {
		id := fmt.Sprint("id-", n)
		out, err := c.Acquire(leasefence.AcquireRequest{RequestID: id, Holder: "a", Resource: id})
		switch {
		case err != nil:
			t.Fatalf("retry of %s: %v", id, err)
		case n >= grants-3 && (!out.OK || out.Grant.RequestID != id || out.Grant.Token.Fence != leasefence.Fence(n+1)):
			t.Errorf("retry of remembered %s = %+v, want its grant with fence %d", id, out, n+1)
		case n < grants-3 && out != refused(leasefence.ReasonAlreadyHeld, "a", testTTL):
			t.Errorf("retry of evicted %s = %+v, want already-held", id, out)
		}
	}
}

// backwardsClock reads 10s, then 5s: the second reading is refused.
func backwardsClock() leasefence.Clock {
	return leasefence.NewClock("coordinator", steppingSource(10*time.Second, 5*time.Second))
}

func wantClockBackwards(t *testing.T, err error) {
	t.Helper()
	var ce *leasefence.ClockError
	if !errors.As(err, &ce) || !errors.Is(err, leasefence.ErrClockBackwards) {
		t.Fatalf("err = %v, want a *ClockError answering ErrClockBackwards", err)
	}
	if *ce != (leasefence.ClockError{Domain: "coordinator", Previous: 10 * time.Second, Reading: 5 * time.Second}) {
		t.Errorf("ClockError = %+v", *ce)
	}
}

func TestCoordinatorClockFailureIsAnError(t *testing.T) {
	a1 := tok("r", "a", 1)
	tests := []struct {
		name string
		call func(c *leasefence.Coordinator) (any, error)
		zero any
	}{
		{"Acquire", func(c *leasefence.Coordinator) (any, error) {
			return c.Acquire(leasefence.AcquireRequest{RequestID: "2", Holder: "b", Resource: "other"})
		}, leasefence.AcquireOutcome{}},
		{"Renew", func(c *leasefence.Coordinator) (any, error) {
			return c.Renew(leasefence.RenewRequest{RequestID: "2", Token: a1})
		}, leasefence.RenewOutcome{}},
		{"Release", func(c *leasefence.Coordinator) (any, error) { return c.Release(a1) }, leasefence.ReleaseOutcome{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var infos int
			c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
				Clock: backwardsClock(), TTL: testTTL,
				Trace: &leasefence.CoordinatorTrace{
					Acquire: func(leasefence.AcquireInfo) { infos++ },
					Renew:   func(leasefence.RenewInfo) { infos++ },
					Release: func(leasefence.ReleaseInfo) { infos++ },
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"})
			if err != nil || out.Grant.Token != a1 || out.Grant.CoordinatorExpiresAt != leasefence.At("coordinator", 11*time.Second) {
				t.Fatalf("first Acquire = %+v, %v", out, err)
			}
			got, err := tt.call(c)
			wantClockBackwards(t, err)
			if got != tt.zero {
				t.Errorf("outcome alongside the error = %+v, want the zero outcome", got)
			}
			if c.IssuedFence() != 1 {
				t.Errorf("IssuedFence() = %d after a failed call, want 1", c.IssuedFence())
			}
			if infos != 1 {
				t.Errorf("trace saw %d answers, want 1: an error is not an answer", infos)
			}
		})
	}
}

func TestCoordinatorMalformedRequests(t *testing.T) {
	clock := leasefence.NewManualClock("coordinator")
	c := newCoordinator(t, clock, testTTL)
	if out, err := c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"}); err != nil || !out.OK {
		t.Fatal(out, err)
	}
	tests := []struct {
		name string
		call func() (any, error)
		zero any
	}{
		{"acquire with no request id", func() (any, error) {
			return c.Acquire(leasefence.AcquireRequest{Holder: "a", Resource: "r2"})
		}, leasefence.AcquireOutcome{}},
		{"acquire with no holder", func() (any, error) {
			return c.Acquire(leasefence.AcquireRequest{RequestID: "2", Resource: "r2"})
		}, leasefence.AcquireOutcome{}},
		{"acquire with no resource", func() (any, error) {
			return c.Acquire(leasefence.AcquireRequest{RequestID: "2", Holder: "a"})
		}, leasefence.AcquireOutcome{}},
		{"acquire with nothing", func() (any, error) {
			return c.Acquire(leasefence.AcquireRequest{})
		}, leasefence.AcquireOutcome{}},
		{"renew with no request id", func() (any, error) {
			return c.Renew(leasefence.RenewRequest{Token: tok("r", "a", 1)})
		}, leasefence.RenewOutcome{}},
		{"renew with no holder", func() (any, error) {
			return c.Renew(leasefence.RenewRequest{RequestID: "2", Token: tok("r", "", 1)})
		}, leasefence.RenewOutcome{}},
		{"renew with no resource", func() (any, error) {
			return c.Renew(leasefence.RenewRequest{RequestID: "2", Token: tok("", "a", 1)})
		}, leasefence.RenewOutcome{}},
		{"release with no holder", func() (any, error) { return c.Release(tok("r", "", 1)) }, leasefence.ReleaseOutcome{}},
		{"release with no resource", func() (any, error) { return c.Release(tok("", "a", 1)) }, leasefence.ReleaseOutcome{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call()
			if !errors.Is(err, leasefence.ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
			if got != tt.zero {
				t.Errorf("outcome = %+v alongside the error", got)
			}
		})
	}
	// None of it changed anything.
	if c.IssuedFence() != 1 {
		t.Errorf("IssuedFence() = %d", c.IssuedFence())
	}
	if out, err := c.Renew(leasefence.RenewRequest{RequestID: "3", Token: tok("r", "a", 1)}); err != nil || out != renewed("3", tok("r", "a", 1), ms(1000)) {
		t.Errorf("Renew after the malformed calls = %+v, %v", out, err)
	}
}

func TestNewCoordinatorOptions(t *testing.T) {
	clock := leasefence.NewManualClock("coordinator")
	bad := []struct {
		name string
		opts leasefence.CoordinatorOptions
	}{
		{"no clock", leasefence.CoordinatorOptions{TTL: time.Second}},
		{"no TTL", leasefence.CoordinatorOptions{Clock: clock}},
		{"negative TTL", leasefence.CoordinatorOptions{Clock: clock, TTL: -time.Second}},
		{"negative ReplayCache", leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second, ReplayCache: -1}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			c, err := leasefence.NewCoordinator(tt.opts)
			if !errors.Is(err, leasefence.ErrInvalidRequest) || c != nil {
				t.Errorf("NewCoordinator = %v, %v; want nil, ErrInvalidRequest", c, err)
			}
		})
	}
	good := []struct {
		name string
		opts leasefence.CoordinatorOptions
	}{
		{"minimal", leasefence.CoordinatorOptions{Clock: clock, TTL: time.Nanosecond}},
		{"StartFence", leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second, StartFence: 1 << 40}},
		{"ReplayCache 1", leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second, ReplayCache: 1}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			c, err := leasefence.NewCoordinator(tt.opts)
			if err != nil || c == nil {
				t.Fatalf("NewCoordinator = %v, %v", c, err)
			}
			if c.IssuedFence() != tt.opts.StartFence {
				t.Errorf("IssuedFence() = %d, want StartFence %d", c.IssuedFence(), tt.opts.StartFence)
			}
			if c.TTL() != tt.opts.TTL {
				t.Errorf("TTL() = %v", c.TTL())
			}
		})
	}
}

func TestCoordinatorReadsItsClockOncePerCall(t *testing.T) {
	// With a step on every read, a second reading within one call would
	// show up as a RetryAfter or an expiry one step off.
	clock := leasefence.NewManualClock("coordinator", leasefence.WithStepPerRead(ms(1)))
	c := newCoordinator(t, clock, testTTL)
	out, _ := c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"}) // reads 0
	if out != granted("1", tok("r", "a", 1), ms(1000)) {
		t.Fatalf("Acquire = %+v", out)
	}
	out, _ = c.Acquire(leasefence.AcquireRequest{RequestID: "2", Holder: "b", Resource: "r"}) // reads 1ms
	if out != refused(leasefence.ReasonHeld, "a", ms(999)) {
		t.Fatalf("Acquire = %+v", out)
	}
	rout, _ := c.Renew(leasefence.RenewRequest{RequestID: "3", Token: tok("r", "a", 1)}) // reads 2ms
	if rout != renewed("3", tok("r", "a", 1), ms(1002)) {
		t.Fatalf("Renew = %+v", rout)
	}
	if rel, _ := c.Release(tok("r", "a", 1)); rel != released { // reads 3ms
		t.Fatalf("Release = %+v", rel)
	}
	if now, _ := clock.Now(); now != leasefence.At("coordinator", ms(4)) {
		t.Errorf("clock read %v times in 4 calls", now.Offset()/ms(1))
	}
}

func TestCoordinatorTrace(t *testing.T) {
	var (
		acquires []leasefence.AcquireInfo
		renews   []leasefence.RenewInfo
		releases []leasefence.ReleaseInfo
	)
	var c *leasefence.Coordinator
	var issuedSeen []leasefence.Fence
	clock := leasefence.NewManualClock("coordinator")
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: clock, TTL: testTTL,
		Trace: &leasefence.CoordinatorTrace{
			Acquire: func(i leasefence.AcquireInfo) {
				acquires = append(acquires, i)
				// Hooks run outside the coordinator's lock.
				issuedSeen = append(issuedSeen, c.IssuedFence())
			},
			Renew:   func(i leasefence.RenewInfo) { renews = append(renews, i) },
			Release: func(i leasefence.ReleaseInfo) { releases = append(releases, i) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) leasefence.Instant { return leasefence.At("coordinator", d) }
	a1 := tok("r", "a", 1)
	req1 := leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r", SentAt: leasefence.At("agent-a", 5)}
	req2 := leasefence.AcquireRequest{RequestID: "2", Holder: "b", Resource: "r"}
	ren := leasefence.RenewRequest{RequestID: "r1", Token: a1}

	c.Acquire(req1)
	clock.Advance(ms(100))
	c.Acquire(req1) // replay
	c.Acquire(req2) // held
	clock.Advance(ms(100))
	c.Renew(ren)
	c.Release(a1)
	c.Release(a1)
	c.Acquire(leasefence.AcquireRequest{RequestID: "", Holder: "b", Resource: "r"}) // malformed: not traced

	wantAcq := []leasefence.AcquireInfo{
		{Request: req1, Outcome: granted("1", a1, ms(1000)), At: at(0)},
		{Request: req1, Outcome: granted("1", a1, ms(1000)), Replayed: true, At: at(ms(100))},
		{Request: req2, Outcome: refused(leasefence.ReasonHeld, "a", ms(900)), At: at(ms(100))},
	}
	if !slices.Equal(acquires, wantAcq) {
		t.Errorf("Acquire hook saw\n%+v\nwant\n%+v", acquires, wantAcq)
	}
	if !slices.Equal(issuedSeen, []leasefence.Fence{1, 1, 1}) {
		t.Errorf("IssuedFence from inside the hook = %v", issuedSeen)
	}
	wantRen := []leasefence.RenewInfo{{Request: ren, Outcome: renewed("r1", a1, ms(1200)), At: at(ms(200))}}
	if !slices.Equal(renews, wantRen) {
		t.Errorf("Renew hook saw %+v, want %+v", renews, wantRen)
	}
	wantRel := []leasefence.ReleaseInfo{
		{Token: a1, Outcome: released, At: at(ms(200))},
		{Token: a1, Outcome: releaseRefused(leasefence.ReasonReleased), At: at(ms(200))},
	}
	if !slices.Equal(releases, wantRel) {
		t.Errorf("Release hook saw %+v, want %+v", releases, wantRel)
	}
}

func TestCoordinatorNilHooks(t *testing.T) {
	// A trace with some hooks unset costs nothing and breaks nothing.
	var n int
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: leasefence.NewManualClock("coordinator"), TTL: testTTL,
		Trace: &leasefence.CoordinatorTrace{Renew: func(leasefence.RenewInfo) { n++ }},
	})
	if err != nil {
		t.Fatal(err)
	}
	a1 := tok("r", "a", 1)
	c.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: "r"})
	c.Renew(leasefence.RenewRequest{RequestID: "2", Token: a1})
	c.Release(a1)
	if n != 1 {
		t.Errorf("Renew hook ran %d times", n)
	}
}

// TestCoordinatorConcurrentNoTime: leases end only by release, so the test
// can track ownership itself: whoever is granted a resource must find it
// unowned, and nobody else is granted it until the owner has released it.
func TestCoordinatorConcurrentNoTime(t *testing.T) {
	const holders, resources, rounds = 8, 3, 200
	clock := leasefence.NewManualClock("coordinator")
	c := newCoordinator(t, clock, time.Hour)
	var owner [resources]atomic.Int32 // holder+1, 0 when free
	var grants atomic.Int64
	var wg sync.WaitGroup
	for h := range holders {
		wg.Go(func() {
			holder := fmt.Sprint("h", h)
			for n := range rounds {
				r := (h + n) % resources
				res := fmt.Sprint("r", r)
				out, err := c.Acquire(leasefence.AcquireRequest{RequestID: fmt.Sprint(holder, "-", n), Holder: holder, Resource: res})
				if err != nil {
					t.Error(err)
					return
				}
				if !out.OK {
					if out.Reason != leasefence.ReasonHeld || out.HeldBy == holder || out.HeldBy == "" {
						t.Errorf("refusal %+v", out)
						return
					}
					continue
				}
				grants.Add(1)
				if !owner[r].CompareAndSwap(0, int32(h+1)) {
					t.Errorf("%s granted %s (fence %d) while %d holds it", holder, res, out.Grant.Token.Fence, owner[r].Load()-1)
					return
				}
				for k := range 3 {
					rout, err := c.Renew(leasefence.RenewRequest{RequestID: fmt.Sprint(holder, "-", n, "-", k), Token: out.Grant.Token})
					if err != nil || !rout.OK || rout.Grant.Token != out.Grant.Token {
						t.Errorf("renew of %v = %+v, %v", out.Grant.Token, rout, err)
						return
					}
				}
				if !owner[r].CompareAndSwap(int32(h+1), 0) {
					t.Errorf("ownership of %s changed under %s", res, holder)
					return
				}
				rel, err := c.Release(out.Grant.Token)
				if err != nil || !rel.OK {
					t.Errorf("release of %v = %+v, %v", out.Grant.Token, rel, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := c.IssuedFence(); int64(got) != grants.Load() {
		t.Errorf("IssuedFence() = %d after %d grants: a fence was burned or reused", got, grants.Load())
	}
}

// TestCoordinatorConcurrentWithTime: time moves on every read, so leases
// also expire. The trace records every answer with the coordinator's
// reading; afterwards, for every resource, each generation's lease must have
// ended (expired or been released) before the next one was granted.
func TestCoordinatorConcurrentWithTime(t *testing.T) {
	const holders, resources, rounds = 8, 2, 300
	ttl := ms(20)
	clock := leasefence.NewManualClock("coordinator", leasefence.WithStepPerRead(ms(1)))

	type generation struct {
		token   leasefence.Token
		granted time.Duration
		end     time.Duration // latest expiry, or release reading
	}
	var mu sync.Mutex
	gens := map[leasefence.Fence]*generation{}
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: clock, TTL: ttl,
		Trace: &leasefence.CoordinatorTrace{
			Acquire: func(i leasefence.AcquireInfo) {
				if !i.Outcome.OK || i.Replayed {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				f := i.Outcome.Grant.Token.Fence
				if gens[f] != nil {
					t.Errorf("fence %d granted twice", f)
				}
				gens[f] = &generation{token: i.Outcome.Grant.Token, granted: i.At.Offset(), end: i.Outcome.Grant.CoordinatorExpiresAt.Offset()}
			},
			Renew: func(i leasefence.RenewInfo) {
				if !i.Outcome.OK {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				g := gens[i.Outcome.Grant.Token.Fence]
				g.end = max(g.end, i.Outcome.Grant.CoordinatorExpiresAt.Offset())
			},
			Release: func(i leasefence.ReleaseInfo) {
				if !i.Outcome.OK {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				g := gens[i.Token.Fence]
				g.end = min(g.end, i.At.Offset())
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for h := range holders {
		wg.Go(func() {
			holder := fmt.Sprint("h", h)
			var held *leasefence.Token
			for n := range rounds {
				id := fmt.Sprint(holder, "-", n)
				switch {
				case held == nil:
					out, err := c.Acquire(leasefence.AcquireRequest{RequestID: id, Holder: holder, Resource: fmt.Sprint("r", n%resources)})
					if err != nil {
						t.Error(err)
						return
					}
					if out.OK {
						held = &out.Grant.Token
					}
				case n%4 == 0:
					if _, err := c.Release(*held); err != nil {
						t.Error(err)
						return
					}
					held = nil
				default:
					out, err := c.Renew(leasefence.RenewRequest{RequestID: id, Token: *held})
					if err != nil {
						t.Error(err)
						return
					}
					if !out.OK {
						held = nil
					} else if out.Grant.Token != *held {
						t.Errorf("renewal of %v returned %v", *held, out.Grant.Token)
					}
				}
			}
		})
	}
	wg.Wait()

	if int(c.IssuedFence()) != len(gens) {
		t.Fatalf("IssuedFence() = %d, %d generations granted", c.IssuedFence(), len(gens))
	}
	last := map[string]*generation{}
	for f := leasefence.Fence(1); f <= c.IssuedFence(); f++ {
		g := gens[f]
		if g == nil {
			t.Fatalf("fence %d never granted", f)
		}
		if p := last[g.token.Resource]; p != nil && g.granted < p.end {
			t.Errorf("%v granted at %v while %v was live until %v", g.token, g.granted, p.token, p.end)
		}
		last[g.token.Resource] = g
	}
	if len(gens) < 10 {
		t.Errorf("only %d generations: the test did not exercise handovers", len(gens))
	}
}
