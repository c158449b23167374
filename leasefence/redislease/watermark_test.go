package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// A Redis that comes back empty (a restart without AOF here; a failover to
// a replica that missed the writes does the same) has lost the counter and
// the gate's floor. Without a watermark the same-Redis gate then admits a
// stale holder whose fence is above the rewound floor (the documented
// cost, TestRestartWithoutAOFReissuesFences). With one, the process that
// saw the floor puts it back before judging: the stale holder is refused
// and logged, a fence issued again to another holder meets a token
// conflict, the coordinator mints above every fence the process saw, and
// each rewind is recorded as ErrRewound.
func TestWatermarkCatchesARewoundCounterAndFloor(t *testing.T) {
	s := startServer(t, false)
	ctx := t.Context()
	before := s.client()
	defer before.Close()
	wm := redislease.NewWatermark()
	opts := redislease.Options{TTL: 10 * time.Second, Watermark: wm}
	acquire(t, before, opts, "warm-up", "x")          // fence 1
	stale := acquire(t, before, opts, "r", "agent-b") // fence 2
	newest := acquire(t, before, opts, "s", "agent-c")
	g, err := redislease.NewGate(before, "r", redislease.GateOptions{Watermark: wm})
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(ctx, g, stale); err != nil {
		t.Fatal(err)
	}
	gs, _ := redislease.NewGate(before, "s", redislease.GateOptions{Watermark: wm})
	if err := commit(ctx, gs, newest); err != nil {
		t.Fatal(err)
	}

	s.restart()
	after := s.client()
	defer after.Close()
	// The counter is gone: a coordinator without the watermark reissues 1.
	reissued := acquire(t, after, redislease.Options{}, "s", "agent-d")
	if reissued.Fence != 1 {
		t.Fatalf("fence %d after the restart without AOF; want 1, the counter lost", reissued.Fence)
	}
	// A process with the watermark passes every fence it saw.
	passed := acquire(t, after, opts, "t", "agent-e")
	if passed.Fence <= newest.Fence {
		t.Fatalf("with the watermark, fence %d after seeing %d", passed.Fence, newest.Fence)
	}

	g, _ = redislease.NewGate(after, "r", redislease.GateOptions{Watermark: wm})
	// agent-d's fence 1 was issued again, on s; on r the floor was agent-b@2.
	below := leasefence.Token{Resource: "r", Holder: "agent-d", Fence: 1}
	var stErr *leasefence.StaleFenceError
	if err := commit(ctx, g, below); !errors.As(err, &stErr) || stErr.Seq != 1 || stErr.FloorFence != stale.Fence {
		t.Fatalf("a fence below the lost floor = %v; want a logged StaleFenceError against %v", err, stale)
	}
	if floor, err := g.Floor(ctx); err != nil || floor != stale {
		t.Fatalf("floor after the gate put it back = %v, %v; want %v", floor, err, stale)
	}
	gs, _ = redislease.NewGate(after, "s", redislease.GateOptions{Watermark: wm})
	conflict := leasefence.Token{Resource: "s", Holder: "agent-f", Fence: newest.Fence}
	if err := commit(ctx, gs, conflict); !errors.Is(err, leasefence.ErrTokenConflict) {
		t.Fatalf("fence %d issued again to another holder = %v; want a token conflict", newest.Fence, err)
	}
	// The floor's own holder writes on; a fence above is admitted.
	if err := commit(ctx, g, stale); err != nil {
		t.Fatalf("the floor's holder after the floor was put back = %v", err)
	}
	if err := commit(ctx, g, leasefence.Token{Resource: "r", Holder: "agent-e", Fence: passed.Fence}); err != nil {
		t.Fatalf("a fence above the floor = %v", err)
	}

	rs, n := wm.Rewinds()
	if n != 3 {
		t.Fatalf("rewinds %v (%d); want the counter's and two floors'", rs, n)
	}
	for _, r := range rs {
		if !errors.Is(r, redislease.ErrRewound) || !r.Repaired || r.Found >= r.Seen {
			t.Errorf("rewind %+v: want ErrRewound, repaired, found below seen", r)
		}
	}
}

// Without a watermark the same sequence lands the write below the lost
// floor: the control that shows what the watermark catches.
func TestWithoutWatermarkTheLostFloorAdmits(t *testing.T) {
	s := startServer(t, false)
	ctx := t.Context()
	before := s.client()
	defer before.Close()
	acquire(t, before, redislease.Options{}, "warm-up", "x")
	held := acquire(t, before, redislease.Options{}, "r", "agent-b")
	g, _ := redislease.NewGate(before, "r", redislease.GateOptions{})
	if err := commit(ctx, g, held); err != nil {
		t.Fatal(err)
	}
	s.restart()
	after := s.client()
	defer after.Close()
	g, _ = redislease.NewGate(after, "r", redislease.GateOptions{})
	if err := commit(ctx, g, leasefence.Token{Resource: "r", Holder: "agent-d", Fence: 1}); err != nil {
		t.Fatalf("without a watermark, a fence below the lost floor = %v; want admitted (the hole the watermark closes)", err)
	}
}

func TestNilWatermarkRemembersNothing(t *testing.T) {
	var wm *redislease.Watermark
	if rs, n := wm.Rewinds(); rs != nil || n != 0 {
		t.Fatalf("nil watermark: %v, %d", rs, n)
	}
	if f := wm.Fence(""); f != 0 {
		t.Fatalf("nil watermark: fence %d", f)
	}
}
