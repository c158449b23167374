package history

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// The checker must catch each kind of violation in a history made by hand,
// with no simulation or gate behind it: testdata/*.jsonl.
func TestCheckerOnHandMadeHistories(t *testing.T) {
	type want struct {
		stale, reissued, overlaps, silent, refusedOverlaps, breaches, reuses, unexplained int
		violation                                                                         string // a substring of one violation; "" for none
		cx                                                                                CounterexampleKind
		cxAt                                                                              float64
	}
	for _, tc := range []struct {
		file string
		want want
	}{
		{"stale_write", want{stale: 1, overlaps: 1, silent: 1, violation: "1 stale write landed", cx: StaleWrite, cxAt: 1400}},
		{"refused_overlap", want{overlaps: 1, refusedOverlaps: 1, cx: RefusedWrite, cxAt: 1000}},
		{"naive_stale_write", want{stale: 1, overlaps: 1, silent: 1, cx: StaleWrite, cxAt: 1400}},
		{"containment_breach", want{breaches: 1, violation: "1 containment breach with", cx: ContainmentBreach, cxAt: 1040}},
		{"containment_beyond_budget", want{breaches: 1, cx: ContainmentBreach, cxAt: 1040}},
		{"fence_reuse", want{reuses: 1, violation: "1 fence reused", cx: FenceReuse, cxAt: 200}},
		{"fence_reuse_after_persisted_restart", want{reuses: 1, violation: "1 fence reused", cx: FenceReuse, cxAt: 200}},
		{"fence_reuse_after_lost_restart", want{reuses: 1, cx: FenceReuse, cxAt: 200}},
		{"unexplained_refusal", want{unexplained: 1, violation: "1 refusal with no overlap behind it", cx: UnexplainedRefusal, cxAt: 550}},
		{"library_error", want{violation: "the library returned an error: CompleteAcquire"}},
		// A coordinator that lost its counter reissues fence 1 after fence
		// 5 was released: the sole holder's writes land under the
		// resource's current generation, a lower fence but not stale (by
		// fence number alone both were).
		{"reissued_fence_sole_holder", want{reissued: 2, reuses: 1, cx: FenceReuse, cxAt: 200}},
		// The holder of fence 5 of the forgotten incarnation writes after
		// the reissued fence 1 of the newer generation landed: stale,
		// although its fence is higher (by fence number alone, fence 1 was
		// the stale one).
		{"stale_across_restart", want{stale: 1, reissued: 1, overlaps: 1, silent: 1, reuses: 1, cx: StaleWrite, cxAt: 400}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, events, err := ReadFile(filepath.Join("testdata", tc.file+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			res := Check(h, events)
			if len(res.Modes) != 1 {
				t.Fatalf("got %d modes, want 1", len(res.Modes))
			}
			r := res.Modes[h.Modes[0]]
			w := tc.want
			got := want{r.StaleWritesLanded, r.ReissuedWritesLanded, r.Overlaps, r.SilentOverlaps, r.RefusedOverlaps, r.ContainmentBreaches,
				r.FenceReuses, r.UnexplainedRefusals, "", "", 0}
			w2 := w
			w2.violation, w2.cx, w2.cxAt = "", "", 0
			if got != w2 {
				t.Errorf("counters %+v, want %+v", got, w2)
			}
			joined := strings.Join(r.Violations, "; ")
			if (w.violation == "") != (len(r.Violations) == 0) || !strings.Contains(joined, w.violation) {
				t.Errorf("violations %q, want %q", r.Violations, w.violation)
			}
			if res.Failed() != (w.violation != "") {
				t.Errorf("Failed() = %v with violations %q", res.Failed(), r.Violations)
			}
			if w.cx != "" {
				if len(r.Counterexamples) == 0 {
					t.Fatalf("no counterexample, want %s", w.cx)
				}
				if cx := r.Counterexamples[0]; cx.Kind != w.cx || cx.AtMS != w.cxAt {
					t.Errorf("counterexample %+v, want %s at %vms", cx, w.cx, w.cxAt)
				}
			} else if len(r.Counterexamples) != 0 {
				t.Errorf("counterexamples %+v, want none", r.Counterexamples)
			}
		})
	}
}

func TestStaleWriteCounterexampleNamesTheFloor(t *testing.T) {
	h, events, err := ReadFile("testdata/stale_write.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := Check(h, events).Modes[Fenced]
	cx := r.Counterexamples[0]
	if cx.Holder != "agent-1" || cx.Fence != 1 || cx.Other != "agent-2" || cx.OtherFence != 2 {
		t.Fatalf("counterexample %+v", cx)
	}
	if pr := r.PerResource[0]; pr.FloorFence != 2 || pr.FloorHolder != "agent-2" || pr.CommitsAdmitted != 2 || pr.StaleWritesLanded != 1 {
		t.Fatalf("per resource %+v", pr)
	}
}

func TestCounterexamplesAreCapped(t *testing.T) {
	h := testHeader()
	h.Modes = []Mode{Fenced}
	var events []Event
	for i := range 20 {
		at := time.Duration(i) * time.Millisecond
		events = append(events,
			Event{At: at, Mode: Fenced, Kind: Granted, Agent: 0, Resource: 0, Fence: 20 - leasefence.Fence(i), Other: -1, Deadline: at + time.Second},
			Event{At: at, Mode: Fenced, Kind: Acquired, Agent: 0, Resource: 0, Fence: 20 - leasefence.Fence(i), Other: -1, Deadline: at + 2*time.Second})
	}
	r := Check(h, events).Modes[Fenced]
	if r.ContainmentBreaches != 20 || r.FenceReuses != 19 {
		t.Fatalf("breaches=%d reuses=%d, want 20 and 19", r.ContainmentBreaches, r.FenceReuses)
	}
	kinds := map[CounterexampleKind]int{}
	for _, cx := range r.Counterexamples {
		kinds[cx.Kind]++
	}
	if kinds[ContainmentBreach] != MaxCounterexamples || kinds[FenceReuse] != MaxCounterexamples {
		t.Fatalf("counterexamples by kind %v, want %d of each", kinds, MaxCounterexamples)
	}
}

// The Reader folds beliefs: an abandoned lease stops being believed when
// it is given up, and a write after the belief ended stretches acting.
func TestReaderFoldsBeliefs(t *testing.T) {
	h := testHeader()
	rd := NewReader(&h)
	for _, e := range []Event{
		{At: 0, Kind: Granted, Agent: 1, Resource: 0, Fence: 7, Deadline: time.Second},
		{At: 5, Kind: Acquired, Agent: 1, Resource: 0, Fence: 7, Deadline: 900},
		{At: 100, Kind: Renewed, Agent: 1, Resource: 0, Fence: 7, Deadline: 1900},
		{At: 150, Kind: Extended, Agent: 1, Resource: 0, Fence: 7, Deadline: 2000},
		{At: 300, Kind: CommitAdmitted, Agent: 1, Resource: 0, Fence: 7},
		{At: 400, Kind: LeaseAbandoned, Agent: 1, Resource: 0, Fence: 7, Outcome: OutcomeDone},
		{At: 500, Kind: Released, Agent: 1, Resource: 0, Fence: 7},
	} {
		rd.Add(&e)
	}
	gens := rd.Generations()
	if len(gens) != 1 {
		t.Fatalf("%d generations", len(gens))
	}
	g := gens[0]
	if g.Start != 5 || g.BeliefEnd != 400 || g.ActEnd != 400 || g.CoordEnd != 500 || !g.Released || !g.Lapsed() {
		t.Fatalf("generation %+v", g)
	}
	if rd.Holding(1) != -1 || rd.Latest(0) != 0 || rd.Find(0, 0, 7) != 0 || rd.Find(1, 0, 7) != -1 {
		t.Fatalf("holding %d latest %d", rd.Holding(1), rd.Latest(0))
	}
	if ws := rd.Writes(); len(ws) != 1 || ws[0].Gen != 0 || ws[0].Stale {
		t.Fatalf("writes %+v", ws)
	}
}

func TestCheckIgnoresModesOutsideTheHeader(t *testing.T) {
	h := testHeader()
	h.Modes = []Mode{Naive}
	res := Check(h, []Event{{Mode: Fenced, Kind: LibraryError, Agent: -1, Resource: -1, Other: -1}})
	if res.Failed() || !slices.Equal(keys(res.Modes), []Mode{Naive}) {
		t.Fatalf("result %+v", res)
	}
}

func keys(m map[Mode]*Report) []Mode {
	var ks []Mode
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// An event that names no agent or resource where its kind names one is
// never dropped quietly: the Reader refuses it and says why, and the
// checker counts it as a violation in either mode.
func TestReaderRefusesEventsWithoutTheirParties(t *testing.T) {
	h := Header{Format: FormatVersion, Scenario: "hand", Modes: []Mode{Naive, Fenced}, TTL: time.Second,
		Agents: []string{"agent-1", "agent-2"}, Resources: []string{"res-1"}}
	events := []Event{
		{Mode: Fenced, Kind: Granted, Agent: 1, Resource: 0, Fence: 2, Other: -1},
		{Mode: Fenced, Kind: Acquired, Agent: 1, Resource: 0, Fence: 2, Other: -1},
		{Mode: Fenced, Kind: CommitAdmitted, Agent: 1, Resource: 0, Fence: 2, Other: -1},
		{Mode: Fenced, Kind: CommitAdmitted, Agent: -1, Resource: 0, Fence: 1, Other: -1},
		{Mode: Naive, Kind: Granted, Agent: -1, Resource: 0, Fence: 2, Other: -1},
		{Mode: Naive, Kind: WriteLanded, Agent: 0, Resource: 4, Fence: 2, Other: -1},
	}
	rd := NewReader(&h)
	for i := range events[:3] {
		if err := rd.Add(&events[i]); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if err := rd.Add(&events[3]); !errors.Is(err, ErrBadHistory) || !strings.Contains(err.Error(), "commit_admitted event names no agent") {
		t.Errorf("a landed write of no agent: got %v", err)
	}
	if rd.Refused() != 1 || len(rd.Writes()) != 1 {
		t.Errorf("refused %d, kept %d writes; want 1 and 1", rd.Refused(), len(rd.Writes()))
	}
	res := Check(h, events)
	for _, m := range h.Modes {
		v := strings.Join(res.Modes[m].Violations, "; ")
		if !strings.Contains(v, UnreadableViolation) {
			t.Errorf("%s violations %q, want the unreadable event", m, v)
		}
	}
	if !res.Failed() {
		t.Error("a history with an unreadable event passed")
	}
}
