package leasefence_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// world is the check-to-write gap: a coordinator and two agents,
// each with a clock of its own domain, all moved together by true time.
type world struct {
	t                *testing.T
	now              time.Duration // true time
	coordClock       *leasefence.ManualClock
	aClock, bClock   *leasefence.ManualClock
	coord            *leasefence.Coordinator
	clientA, clientB *leasefence.Client
	ttl              time.Duration
	aOffset, bOffset time.Duration // each agent clock's reading at true 0
	coordOffset      time.Duration
	gate             *leasefence.FenceGate
	naive            *naiveResource
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, ttl: ms(1000), aOffset: ms(123456), bOffset: ms(77), coordOffset: ms(5000)}
	w.coordClock = leasefence.NewManualClock("coordinator", leasefence.WithStart(w.coordOffset))
	w.aClock = leasefence.NewManualClock("agent-a", leasefence.WithStart(w.aOffset))
	w.bClock = leasefence.NewManualClock("agent-b", leasefence.WithStart(w.bOffset))
	w.coord = newCoordinator(t, w.coordClock, w.ttl)
	w.clientA = newClient(t, w.aClock, "agent-a", 0)
	w.clientB = newClient(t, w.bClock, "agent-b", 0)
	w.gate = leasefence.NewFenceGate("deploy-slot")
	w.naive = &naiveResource{}
	return w
}

// at moves true time forward to t.
func (w *world) at(t time.Duration) {
	w.t.Helper()
	if t < w.now {
		w.t.Fatalf("timeline goes backwards: %v after %v", t, w.now)
	}
	d := t - w.now
	w.now = t
	w.coordClock.Advance(d)
	w.aClock.Advance(d)
	w.bClock.Advance(d)
}

// acquire runs an instantaneous round trip for client and returns the real
// lease and the naive one a four-line implementation would keep.
func (w *world) acquire(client *leasefence.Client, clock leasefence.Clock) (*leasefence.Lease, naiveLease) {
	w.t.Helper()
	lease, grant := acquireLease(w.t, client, w.coord, "deploy-slot")
	reply, _ := clock.Now()
	return lease, naiveLease{clock: clock, expiresAt: reply.Add(grant.TTL)}
}

// naiveLease is the lease most lock clients keep: store expiresAt = reply
// time + ttl, check now < expiresAt immediately before writing.
type naiveLease struct {
	clock     leasefence.Clock
	expiresAt leasefence.Instant
}

func (n naiveLease) valid(t *testing.T) bool {
	t.Helper()
	now, err := n.clock.Now()
	if err != nil {
		t.Fatal(err)
	}
	before, err := now.Before(n.expiresAt)
	if err != nil {
		t.Fatal(err)
	}
	return before
}

// naiveResource is a plain in-memory resource: it stores whatever is
// written. It has a conflict log only to show that nothing ever lands in it:
// it has no way to know.
type naiveResource struct {
	values    []string
	conflicts []string
}

func (r *naiveResource) write(v string) { r.values = append(r.values, v) }

// TestOverlapNaiveLease: both agents pass their own check, both writes land,
// the stale one last, and nothing anywhere records a conflict.
func TestOverlapNaiveLease(t *testing.T) {
	w := newWorld(t)

	w.at(0)
	_, naiveA := w.acquire(w.clientA, w.aClock)

	w.at(ms(950))
	checkA := naiveA.valid(t) // 950 < 1000: valid, begin the long write
	// ... A stalls: a model call, a GC pause ...

	w.at(ms(1000)) // the coordinator expires A and reassigns to B
	_, naiveB := w.acquire(w.clientB, w.bClock)
	checkB := naiveB.valid(t)
	if checkB {
		w.naive.write("B")
	}

	w.at(ms(1400)) // A's write lands
	if checkA {
		w.naive.write("A")
	}

	if !checkA || !checkB {
		t.Fatalf("checks: A %v, B %v; the naive lease should pass both", checkA, checkB)
	}
	if !slices.Equal(w.naive.values, []string{"B", "A"}) {
		t.Errorf("resource = %v, want both writes, the stale one last", w.naive.values)
	}
	if len(w.naive.conflicts) != 0 {
		t.Errorf("conflicts = %v", w.naive.conflicts)
	}
	// The coordinator knew all along: A's fence is superseded.
	if out, err := w.coord.Release(tok("deploy-slot", "agent-a", 1)); err != nil || out.Reason != leasefence.ReasonSuperseded {
		t.Errorf("Release(A) = %+v, %v", out, err)
	}
}

// TestOverlapFenceGate: the same timeline through a FenceGate. A's check
// passes just the same, but its write is refused at the resource and the
// refusal is logged with both holders and both fences.
func TestOverlapFenceGate(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	var resource []string

	w.at(0)
	leaseA, _ := w.acquire(w.clientA, w.aClock)
	if leaseA.Deadline != leasefence.At("agent-a", w.aOffset+ms(1000)) {
		t.Fatalf("A's deadline = %v", leaseA.Deadline)
	}

	w.at(ms(950))
	expired, err := leaseA.HasExpired() // advisory: valid at 950
	if err != nil || expired {
		t.Fatalf("A's check at 950ms: HasExpired() = %v, %v", expired, err)
	}
	if !w.gate.WouldAdmit(leaseA.Token) {
		t.Fatalf("A's WouldAdmit at 950ms = false")
	}

	w.at(ms(1000))
	leaseB, _ := w.acquire(w.clientB, w.bClock)
	if leaseB.Token.Fence <= leaseA.Token.Fence {
		t.Fatalf("B's fence %d is not above A's %d", leaseB.Token.Fence, leaseA.Token.Fence)
	}
	if err := w.gate.Commit(ctx, leaseB.Token, func(context.Context) error {
		resource = append(resource, "B")
		return nil
	}); err != nil {
		t.Fatalf("B's write: %v", err)
	}

	w.at(ms(1400)) // A's write lands
	err = w.gate.Commit(ctx, leaseA.Token, func(context.Context) error {
		resource = append(resource, "A")
		return nil
	})
	var stale *leasefence.StaleFenceError
	if !errors.As(err, &stale) {
		t.Fatalf("A's write at 1400ms = %v, want *StaleFenceError", err)
	}
	want := leasefence.Rejection{
		Seq: 1, Resource: "deploy-slot",
		Holder: "agent-a", Fence: leaseA.Token.Fence,
		FloorHolder: "agent-b", FloorFence: leaseB.Token.Fence,
	}
	if stale.Rejection != want {
		t.Errorf("refusal = %+v, want %+v", stale.Rejection, want)
	}
	if log := w.gate.Rejections(); !slices.Equal(log, []leasefence.Rejection{want}) {
		t.Errorf("Rejections() = %+v, want [%+v]", log, want)
	}
	if !slices.Equal(resource, []string{"B"}) {
		t.Errorf("resource = %v, want only B's write", resource)
	}
}

// TestOverlapAdmitAtReassignment: the coordinator pushes B's fence to the
// gate when it reassigns, so A's late write is refused even though B has
// not written yet.
func TestOverlapAdmitAtReassignment(t *testing.T) {
	w := newWorld(t)
	w.at(0)
	leaseA, _ := w.acquire(w.clientA, w.aClock)
	w.at(ms(1000))
	leaseB, _ := w.acquire(w.clientB, w.bClock)
	if err := w.gate.Admit(leaseB.Token); err != nil {
		t.Fatal(err)
	}
	w.at(ms(1400))
	err := w.gate.Commit(t.Context(), leaseA.Token, func(context.Context) error { t.Error("A wrote"); return nil })
	wantStale(t, err, leasefence.Rejection{
		Seq: 1, Resource: "deploy-slot", Holder: "agent-a", Fence: 1, FloorHolder: "agent-b", FloorFence: 2,
	})
}

// TestOverlapKnownLimit pins the documented limit: without Admit, a stale
// write that lands before the new holder has written is admitted, and the
// new holder's write still goes through after it.
func TestOverlapKnownLimit(t *testing.T) {
	w := newWorld(t)
	var resource []string
	write := func(v string) func(context.Context) error {
		return func(context.Context) error { resource = append(resource, v); return nil }
	}
	w.at(0)
	leaseA, _ := w.acquire(w.clientA, w.aClock)
	w.at(ms(1000))
	leaseB, _ := w.acquire(w.clientB, w.bClock)
	w.at(ms(1100))
	if err := w.gate.Commit(t.Context(), leaseA.Token, write("A")); err != nil {
		t.Fatalf("A's write before B's = %v: the documented limit says it is admitted", err)
	}
	w.at(ms(1200))
	if err := w.gate.Commit(t.Context(), leaseB.Token, write("B")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resource, []string{"A", "B"}) || len(w.gate.Rejections()) != 0 {
		t.Errorf("resource %v, rejections %v", resource, w.gate.Rejections())
	}
	// From here on A is refused.
	if err := w.gate.Commit(t.Context(), leaseA.Token, write("A")); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Errorf("A after B = %v", err)
	}
}

// TestCheckToWriteGap writes the gap down. With a clock that only moves
// between calls, a validity check and the write after it observe the same
// instant, so a check one tick before the deadline looks safe. With
// WithStepPerRead every read moves time, so the check and the write observe
// different instants: the check says valid, and the write happens at the
// deadline, when the coordinator has already handed the lease to B.
func TestCheckToWriteGap(t *testing.T) {
	const step = time.Millisecond
	tests := []struct {
		name        string
		opts        []leasefence.ManualOption
		wantGap     time.Duration // from the check's reading to the write's
		wantExpired bool          // at the write's instant
	}{
		{"clock moves only between calls", nil, 0, false},
		{"clock moves on every read", []leasefence.ManualOption{leasefence.WithStepPerRead(step)}, step, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := leasefence.NewManualClock("agent-a", tt.opts...)
			coordClock := leasefence.NewManualClock("coordinator")
			coord := newCoordinator(t, coordClock, ms(1000))
			client := newClient(t, agent, "agent-a", 0)
			gate := leasefence.NewFenceGate("r")

			req, _ := client.BeginAcquire("r") // reads agent 0
			out, _ := coord.Acquire(req)
			lease, err := client.CompleteAcquire(req, out.Grant)
			if err != nil || lease.Deadline != leasefence.At("agent-a", ms(1000)) {
				t.Fatalf("lease %+v, %v", lease, err)
			}

			// Move the agent so that its next read is one tick before
			// its deadline (reading it moves a stepping clock by one gap).
			now, _ := agent.Now()
			agent.Advance(ms(1000) - step - (now.Offset() + tt.wantGap))

			// The check: HasExpired reads the clock once, one tick before
			// the deadline, and says the lease is valid.
			expired, err := lease.HasExpired()
			if err != nil || expired {
				t.Fatalf("HasExpired() = %v, %v one tick before the deadline", expired, err)
			}
			checkAt := leasefence.At("agent-a", ms(1000)-step)

			// The write stamps the instant it runs.
			var writeAt leasefence.Instant
			write := func(context.Context) error { writeAt, _ = agent.Now(); return nil }
			if err := gate.Commit(t.Context(), lease.Token, write); err != nil {
				t.Fatal(err)
			}
			gap, err := writeAt.Sub(checkAt)
			if err != nil || gap != tt.wantGap {
				t.Fatalf("check at %v, write at %v: gap %v (%v), want %v", checkAt, writeAt, gap, err, tt.wantGap)
			}
			expiredAtWrite, _ := lease.Deadline.Before(writeAt)
			expiredAtWrite = expiredAtWrite || writeAt == lease.Deadline
			if expiredAtWrite != tt.wantExpired {
				t.Errorf("write at %v, deadline %v: expired at the write = %v, want %v", writeAt, lease.Deadline, expiredAtWrite, tt.wantExpired)
			}
			if !tt.wantExpired {
				return
			}

			// At that same true instant the coordinator has let A go and
			// hands the lease to B, whose write raises the floor: from then
			// on A's writes are refused at the resource, whatever its own
			// check said.
			coordClock.Advance(ms(1000))
			outB, err := coord.Acquire(leasefence.AcquireRequest{RequestID: "b-1", Holder: "agent-b", Resource: "r"})
			if err != nil || !outB.OK {
				t.Fatalf("B's acquire = %+v, %v", outB, err)
			}
			if err := gate.Commit(t.Context(), outB.Grant.Token, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			err = gate.Commit(t.Context(), lease.Token, write)
			wantStale(t, err, leasefence.Rejection{Seq: 1, Resource: "r", Holder: "agent-a", Fence: 1, FloorHolder: "agent-b", FloorFence: 2})
		})
	}
}
