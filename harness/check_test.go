package harness

import (
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// The checker must catch each kind of violation in a history made by hand,
// without any simulation or gate behind it.

func handInput(sc *Scenario, mode Mode, leases []leaseRec, writes []writeRec, rej [][]leasefence.Rejection) checkInput {
	return checkInput{
		sc: sc, mode: mode, leases: leases, writes: writes, rejections: rej,
		agentName: func(i int32) string {
			if i < 0 {
				return ""
			}
			return AgentName(int(i))
		},
		resName: func(i int32) string { return ResourceName(int(i)) },
	}
}

const msec = time.Millisecond

// gen is a lease generation held by agent over [start, beliefEnd] with the
// coordinator vouching until coordEnd.
func gen(agent int32, fence leasefence.Fence, start, beliefEnd, coordEnd time.Duration) leaseRec {
	return leaseRec{agent: agent, fence: fence, granted: start, start: start, beliefEnd: beliefEnd,
		actEnd: start, coordEnd: coordEnd}
}

func TestCheckerCatchesStaleWrite(t *testing.T) {
	sc := &Scenario{Resources: 1, TTL: time.Second}
	leases := []leaseRec{gen(0, 1, 0, 1000*msec, 1000*msec), gen(1, 2, 1000*msec, 2000*msec, 2000*msec)}
	leases[0].actEnd = 1400 * msec
	writes := []writeRec{
		{at: 1010 * msec, agent: 1, rec: 1, fence: 2},
		{at: 1400 * msec, agent: 0, rec: 0, fence: 1}, // landed under the newer fence
	}
	r := check(handInput(sc, Fenced, leases, writes, [][]leasefence.Rejection{nil}))
	if r.StaleWritesLanded != 1 || r.SilentOverlaps != 1 || r.Overlaps != 1 {
		t.Fatalf("stale=%d silent=%d overlaps=%d, want 1 1 1", r.StaleWritesLanded, r.SilentOverlaps, r.Overlaps)
	}
	if len(r.Violations) == 0 {
		t.Fatal("a stale write in fenced mode is not a violation")
	}
	cx := r.Counterexamples[0]
	if cx.Kind != StaleWrite || cx.Holder != "agent-1" || cx.Fence != 1 || cx.Other != "agent-2" || cx.OtherFence != 2 || cx.AtMS != 1400 {
		t.Fatalf("counterexample %+v", cx)
	}
}

func TestCheckerCountsRefusedOverlap(t *testing.T) {
	sc := &Scenario{Resources: 1, TTL: time.Second}
	leases := []leaseRec{gen(0, 1, 0, 1000*msec, 1000*msec), gen(1, 2, 1000*msec, 2000*msec, 2000*msec)}
	leases[0].actEnd = 1400 * msec
	writes := []writeRec{
		{at: 1010 * msec, agent: 1, rec: 1, fence: 2},
		{at: 1400 * msec, agent: 0, rec: 0, fence: 1, refused: true},
	}
	rej := [][]leasefence.Rejection{{{Seq: 1, Resource: "res-1", Holder: "agent-1", Fence: 1, FloorHolder: "agent-2", FloorFence: 2}}}
	r := check(handInput(sc, Fenced, leases, writes, rej))
	if r.StaleWritesLanded != 0 || r.RefusedOverlaps != 1 || r.UnexplainedRefusals != 0 || len(r.Violations) != 0 {
		t.Fatalf("report %+v", r)
	}
}

func TestCheckerCatchesContainmentBreach(t *testing.T) {
	leases := []leaseRec{gen(0, 1, 0, 1100*msec, 1040*msec)}
	for _, c := range []struct {
		name           string
		skew           time.Duration
		ppm            float64
		wantViolations bool
	}{
		{"inside the budget: a bug", 0, 0, true},
		{"beyond the budget: expected", 0, -20000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &Scenario{Resources: 1, TTL: time.Second, ClockSkew: c.skew, Clocks: Clocks{DriftPPM: Range{c.ppm, 0}}}
			r := check(handInput(sc, Fenced, leases, nil, [][]leasefence.Rejection{nil}))
			if r.ContainmentBreaches != 1 {
				t.Fatalf("containment_breaches = %d, want 1", r.ContainmentBreaches)
			}
			if got := len(r.Violations) > 0; got != c.wantViolations {
				t.Fatalf("violations %v, want some: %v", r.Violations, c.wantViolations)
			}
			if cx := r.Counterexamples[0]; cx.Kind != ContainmentBreach || cx.AtMS != 1040 {
				t.Fatalf("counterexample %+v", cx)
			}
		})
	}
}

func TestCheckerCatchesFenceReuse(t *testing.T) {
	leases := []leaseRec{gen(0, 5, 0, 100*msec, 100*msec), gen(1, 3, 200*msec, 300*msec, 300*msec)}
	for _, c := range []struct {
		name     string
		restarts []Restart
		want     bool
	}{
		{"no restart: a bug", nil, true},
		{"persisted restart: a bug", []Restart{{At: 150 * msec, Persist: true}}, true},
		{"restart that lost the counter: expected", []Restart{{At: 150 * msec}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &Scenario{Resources: 1, TTL: time.Second, Restarts: c.restarts}
			r := check(handInput(sc, Fenced, leases, nil, [][]leasefence.Rejection{nil}))
			if r.FenceReuses != 1 {
				t.Fatalf("fence_reuses = %d, want 1", r.FenceReuses)
			}
			if got := len(r.Violations) > 0; got != c.want {
				t.Fatalf("violations %v, want some: %v", r.Violations, c.want)
			}
		})
	}
}

func TestCheckerCatchesUnexplainedRefusal(t *testing.T) {
	sc := &Scenario{Resources: 1, TTL: time.Second}
	// agent-2's lease ended long before agent-1's: no overlap, same
	// coordinator, yet the gate refused agent-1.
	leases := []leaseRec{gen(1, 1, 0, 100*msec, 100*msec), gen(0, 2, 500*msec, 600*msec, 600*msec)}
	writes := []writeRec{{at: 550 * msec, agent: 0, rec: 1, fence: 2, refused: true}}
	cases := map[string][]leasefence.Rejection{
		"no overlap behind it": {{Seq: 1, Resource: "res-1", Holder: "agent-1", Fence: 2, FloorHolder: "agent-2", FloorFence: 1}},
		"logged but never refused at the resource": {
			{Seq: 1, Resource: "res-1", Holder: "agent-1", Fence: 2, FloorHolder: "agent-2", FloorFence: 1},
			{Seq: 2, Resource: "res-1", Holder: "agent-1", Fence: 2, FloorHolder: "agent-2", FloorFence: 1},
		},
		"another holder than the refused write": {{Seq: 1, Resource: "res-1", Holder: "agent-9", Fence: 2, FloorHolder: "agent-2", FloorFence: 1}},
	}
	for name, rej := range cases {
		t.Run(name, func(t *testing.T) {
			r := check(handInput(sc, Fenced, leases, writes, [][]leasefence.Rejection{rej}))
			if r.UnexplainedRefusals == 0 || len(r.Violations) == 0 {
				t.Fatalf("unexplained_refusals = %d, violations %v", r.UnexplainedRefusals, r.Violations)
			}
		})
	}
}

func TestCheckerNaiveHasNoViolations(t *testing.T) {
	sc := &Scenario{Resources: 1, TTL: time.Second}
	leases := []leaseRec{gen(0, 1, 0, 1000*msec, 1000*msec), gen(1, 2, 1000*msec, 2000*msec, 2000*msec)}
	writes := []writeRec{{at: 1010 * msec, agent: 1, rec: 1, fence: 2}, {at: 1400 * msec, agent: 0, rec: 0, fence: 1}}
	r := check(handInput(sc, Naive, leases, writes, nil))
	if r.StaleWritesLanded != 1 || r.Violations != nil {
		t.Fatalf("naive: stale=%d violations=%v", r.StaleWritesLanded, r.Violations)
	}
}

func TestCounterexamplesAreCapped(t *testing.T) {
	sc := &Scenario{Resources: 1, TTL: time.Second}
	var leases []leaseRec
	for i := range 20 {
		leases = append(leases, gen(0, leasefence.Fence(i+1), 0, 2*time.Second, time.Second))
	}
	r := check(handInput(sc, Fenced, leases, nil, [][]leasefence.Rejection{nil}))
	if r.ContainmentBreaches != 20 || len(r.Counterexamples) != MaxCounterexamples {
		t.Fatalf("breaches=%d counterexamples=%d", r.ContainmentBreaches, len(r.Counterexamples))
	}
}

func TestInverseClock(t *testing.T) {
	for _, rate := range []float64{1, 0.98, 1.02, 1.000001, 0.9} {
		for _, offset := range []time.Duration{0, 3 * time.Second, -time.Second} {
			fwd := func(v time.Duration) time.Duration { return offset + time.Duration(float64(v)*rate) }
			for _, r := range []time.Duration{offset, offset + 1, offset + time.Second, offset + 12345678901} {
				v := inverse(r, offset, rate, fwd)
				if fwd(v) < r || fwd(v-1) >= r {
					t.Fatalf("rate %v offset %v: inverse(%v) = %v, fwd(v)=%v fwd(v-1)=%v", rate, offset, r, v, fwd(v), fwd(v-1))
				}
			}
		}
	}
}

func TestTimerQueueOrder(t *testing.T) {
	var q timerQueue
	var seq uint64
	for _, at := range []time.Duration{5, 3, 9, 3, 1, 7, 3} {
		seq++
		q.push(timer{at: at, seq: seq})
	}
	var prev timer
	for i := 0; len(q) > 0; i++ {
		tm := q.pop()
		if i > 0 && tm.less(&prev) {
			t.Fatalf("popped %+v after %+v", tm, prev)
		}
		prev = tm
	}
}
