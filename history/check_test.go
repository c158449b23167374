package history

import (
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/leasefence/lab/leasefence"
)

// The checker must catch each kind of violation in a history made by hand,
// with no simulation or gate behind it: testdata/*.jsonl.
func TestCheckerOnHandMadeHistories(t *testing.T) {
	type want struct {
		stale, reissued, overlaps, silent, refusedOverlaps, breaches, reuses, unexplained int
		landings, refusedLanded, belowPush, releases                                      int
		vacuous                                                                           bool
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
		{"containment_breach", want{vacuous: true, breaches: 1, violation: "1 containment breach with", cx: ContainmentBreach, cxAt: 1040}},
		{"containment_beyond_budget", want{vacuous: true, breaches: 1, cx: ContainmentBreach, cxAt: 1040}},
		{"fence_reuse", want{vacuous: true, reuses: 1, violation: "1 fence reused", cx: FenceReuse, cxAt: 200}},
		{"fence_reuse_after_persisted_restart", want{vacuous: true, reuses: 1, violation: "1 fence reused", cx: FenceReuse, cxAt: 200}},
		{"fence_reuse_after_lost_restart", want{vacuous: true, reuses: 1, cx: FenceReuse, cxAt: 200}},
		{"unexplained_refusal", want{unexplained: 1, violation: "1 refusal whose floor the history does not bear out", cx: UnexplainedRefusal, cxAt: 550}},
		// Fence 2 refused below agent-1@1, then agent-1's fence 1 admitted
		// while agent-2 holds the lease: a floor below the refused fence
		// explains nothing, overlap or not.
		{"refusal_below_refused_fence", want{unexplained: 1, overlaps: 1, refusedOverlaps: 1,
			violation: "1 refusal whose floor the history does not bear out", cx: RefusedWrite, cxAt: 500}},
		// The floor a refusal names is a lease the coordinator granted, but
		// no commit under it was admitted and no push brought it.
		{"refusal_floor_never_raised", want{unexplained: 1,
			violation: "1 refusal whose floor the history does not bear out", cx: UnexplainedRefusal, cxAt: 650}},
		// The header plans a restart that loses the counter, but none
		// happened: the reuse is not excused.
		{"fence_reuse_no_restart_event", want{vacuous: true, reuses: 1, violation: "1 fence reused", cx: FenceReuse, cxAt: 200}},
		// Fence 3 minted after fence 5 before any fault: unexcused. Fence
		// 4 during a fault of the primary that ended failed over, and
		// fence 2 after it: the failover's. An agent's partition, which
		// ended with no failover, explains nothing.
		{"fence_reuse_across_failover", want{vacuous: true, reuses: 3, violation: "2 fences reused after the coordinator's store failed over",
			cx: FenceReuse, cxAt: 120}},
		// Fence 3 was minted after fence 5, before the restart that lost
		// the counter; fence 1 after it is excused, fence 3 is not.
		{"fence_reuse_before_restart", want{vacuous: true, reuses: 2, violation: "1 fence reused", cx: FenceReuse, cxAt: 120}},
		// The record has agent-2's write w2 landed; the runner reported it
		// refused (by a token conflict the history bears out).
		{"refused_write_landed", want{reissued: 1, reuses: 1, refusedLanded: 1, violation: "1 write reported refused landed",
			cx: FenceReuse, cxAt: 200}},
		// The push of fence 2 reached the gate; fence 1 is admitted after.
		{"admitted_below_push", want{belowPush: 1, violation: "1 commit admitted below a fence pushed to the gate",
			cx: AdmittedBelowPush, cxAt: 600}},
		// agent-2 writes at res-2, which it never held, under fence 1 and
		// under fence 9, which was never minted.
		{"unexplained_landing", want{landings: 2, violation: "2 writes landed under no lease the history granted",
			cx: UnexplainedLanding, cxAt: 200}},
		// The coordinator says it released agent-1's fence 1, which had
		// expired: it released something else (agent-1's fence 2, keyed
		// by the holder's name).
		{"release_of_lapsed_lease", want{releases: 1, violation: "1 release granted by the coordinator of a lease no longer live",
			cx: UnexplainedRelease, cxAt: 1150}},
		// A lease taken, and no write made: nothing was put to the test.
		{"vacuous", want{vacuous: true}},
		{"library_error", want{vacuous: true, violation: "the library returned an error: CompleteAcquire"}},
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
				r.FenceReuses, r.UnexplainedRefusals, r.UnexplainedLandings, r.RefusedWritesLanded, r.AdmittedBelowPush, r.UnexplainedReleases, r.Vacuous, "", "", 0}
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

// The fences a failover reissued are counted apart from the others: the
// store's loss, named as such.
func TestFailoverFenceReuses(t *testing.T) {
	h, events, err := ReadFile("testdata/fence_reuse_across_failover.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := Check(h, events).Modes[Fenced]
	if r.FenceReuses != 3 || r.UnexcusedFenceReuses != 1 || r.FailoverFenceReuses != 2 {
		t.Fatalf("reuses %d, unexcused %d, after the failover %d; want 3, 1, 2", r.FenceReuses, r.UnexcusedFenceReuses, r.FailoverFenceReuses)
	}
	if !slices.Contains(r.Violations, "1 fence reused with no restart that lost the counter between the two mints") ||
		!slices.Contains(r.Violations, "2 fences"+FailoverReuseViolation) {
		t.Errorf("violations %q", r.Violations)
	}
}

// A refusal of the newer holder's write is not "the gate refused the
// stale write": the counterexample says whose write it refused, newer by
// what, and why a gate refuses it.
func TestRefusedOverlapSaysWhoseWrite(t *testing.T) {
	h, events, err := ReadFile("testdata/refusal_below_refused_fence.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	const want = "both believed they held it; the gate refused agent-2@2, the newer lease (granted after agent-1@1's), " +
		"as it refuses any fence below the highest it admitted: a later holder's, or one from before a restart that lost the counter " +
		"(a refusal with neither counts as unexplained)"
	seen := 0
	for _, cx := range Check(h, events).Modes[Fenced].Counterexamples {
		if cx.Kind != RefusedWrite {
			continue
		}
		seen++
		if cx.Detail != want {
			t.Errorf("counterexample %+v", cx)
		}
	}
	if seen != 1 {
		t.Errorf("%d refused-write counterexamples, want the one", seen)
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
	// Each grant comes while the one before still runs: a mutual
	// exclusion violation too.
	want := map[CounterexampleKind]int{ContainmentBreach: 20 - MaxCounterexamples, FenceReuse: 19 - MaxCounterexamples,
		MutualExclusionViolation: 19 - MaxCounterexamples}
	if !maps.Equal(r.MoreCounterexamples, want) {
		t.Fatalf("more counterexamples %v, want %v", r.MoreCounterexamples, want)
	}
}

// The counterexamples a report keeps are the first of each kind, and the
// ones it leaves out are counted, whichever part of the checker found
// them: the writes as they come, the rules, the overlaps at the end.
func TestMoreCounterexamplesCountEveryKind(t *testing.T) {
	h := testHeader()
	h.Modes = []Mode{Naive}
	var events []Event
	const n = 3 * MaxCounterexamples
	for i := range n {
		at := time.Duration(i) * 10 * time.Millisecond
		old, cur := leasefence.Fence(2*i+1), leasefence.Fence(2*i+2)
		events = append(events,
			Event{At: at, Mode: Naive, Kind: Granted, Agent: 0, Resource: 0, Fence: old, Other: -1, Deadline: at + 5*time.Millisecond},
			Event{At: at, Mode: Naive, Kind: Acquired, Agent: 0, Resource: 0, Fence: old, Other: -1, Deadline: at + 9*time.Millisecond},
			Event{At: at + time.Millisecond, Mode: Naive, Kind: Granted, Agent: 1, Resource: 0, Fence: cur, Other: -1, Deadline: at + 9*time.Millisecond},
			Event{At: at + time.Millisecond, Mode: Naive, Kind: Acquired, Agent: 1, Resource: 0, Fence: cur, Other: -1, Deadline: at + 9*time.Millisecond},
			Event{At: at + 2*time.Millisecond, Mode: Naive, Kind: WriteLanded, Agent: 1, Resource: 0, Fence: cur, Other: -1},
			Event{At: at + 3*time.Millisecond, Mode: Naive, Kind: WriteLanded, Agent: 0, Resource: 0, Fence: old, Other: -1},
		)
	}
	r := Check(h, events).Modes[Naive]
	if r.StaleWritesLanded != n || r.SilentOverlaps != n || r.ContainmentBreaches != n {
		t.Fatalf("stale %d silent %d breaches %d, want %d of each", r.StaleWritesLanded, r.SilentOverlaps, r.ContainmentBreaches, n)
	}
	// The newer grant comes while the older lease runs: a mutual
	// exclusion violation too.
	want := map[CounterexampleKind]int{StaleWrite: n - MaxCounterexamples, SilentOverlap: n - MaxCounterexamples,
		ContainmentBreach: n - MaxCounterexamples, MutualExclusionViolation: n - MaxCounterexamples}
	if !maps.Equal(r.MoreCounterexamples, want) || len(r.Counterexamples) != 4*MaxCounterexamples {
		t.Fatalf("%d counterexamples kept, more %v; want %d and %v", len(r.Counterexamples), r.MoreCounterexamples, 4*MaxCounterexamples, want)
	}
	if first := r.Counterexamples[0]; first.Kind != StaleWrite || first.AtMS != 3 {
		t.Fatalf("the first counterexample %+v, want the first stale write", first)
	}
	again := Check(h, events[:len(events)/2]).Modes[Naive]
	if again.MoreCounterexamples[StaleWrite] != n/2-MaxCounterexamples {
		t.Fatalf("half the history: more %v", again.MoreCounterexamples)
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
	if n := rd.GenerationCount(); n != 1 {
		t.Fatalf("%d generations", n)
	}
	g := *rd.Generation(0)
	if g.Start != 5 || g.BeliefEnd != 400 || g.ActEnd != 400 || g.CoordEnd != 500 || !g.Released || !g.Lapsed() {
		t.Fatalf("generation %+v", g)
	}
	if rd.Holding(1) != -1 || rd.Latest(0) != 0 || rd.Find(0, 0, 7) != 0 || rd.Find(1, 0, 7) != -1 {
		t.Fatalf("holding %d latest %d", rd.Holding(1), rd.Latest(0))
	}
	if w := rd.LastWrite(); rd.WriteCount() != 1 || w.Gen != 0 || w.Stale || !g.landed || g.firstLanded != 300 || g.lastLanded != 300 {
		t.Fatalf("%d writes, the last %+v; generation %+v", rd.WriteCount(), w, g)
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
	if rd.Refused() != 1 || rd.WriteCount() != 1 {
		t.Errorf("refused %d, folded %d writes; want 1 and 1", rd.Refused(), rd.WriteCount())
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

// A history keeps one Generation per lease generation and nothing per
// event, so the record's size is what a long history costs: keep it small
// (eleven words: its names, its coordinator's ends, its holder's span, its
// writes' span and its flags).
func TestGenerationRecordIsCompact(t *testing.T) {
	if n := unsafe.Sizeof(Generation{}); n > 88 {
		t.Fatalf("a Generation takes %d bytes, want at most 88", n)
	}
}

// The checker counts the faults a run played, whatever their kind, and
// not one it could not play; a fault judges nothing by itself.
func TestCheckCountsFaultsPlayed(t *testing.T) {
	h := Header{Format: FormatVersion, Scenario: "hand", Modes: []Mode{Fenced}, TTL: time.Second,
		Agents: []string{"agent-1"}, Resources: []string{"res-1"}}
	partition := NewFault("partition", 0, "", time.Second)
	events := []Event{
		partition,
		NewFault("restart", -1, TargetCoordinator, 0),
		{Kind: FaultBegan, Fault: "pause_leader", Agent: -1, Resource: -1, Other: -1, Target: "etcd member 1", Dur: time.Second,
			Outcome: OutcomeNotPlayed, Detail: "no leader"},
		partition.Ended(),
		{Kind: Granted, Agent: 0, Resource: 0, Fence: 1, Other: -1},
		{Kind: Acquired, Agent: 0, Resource: 0, Fence: 1, Other: -1, Deadline: time.Second},
		{Kind: CommitAdmitted, Agent: 0, Resource: 0, Fence: 1, Other: -1},
	}
	for i := range events {
		events[i].Mode, events[i].At = Fenced, time.Duration(i)*time.Millisecond
	}
	res := Check(h, events)
	if rep := res.Modes[Fenced]; rep.FaultsPlayed != 2 || res.Failed() || len(rep.Violations) != 0 {
		t.Errorf("faults played %d, failed %v, violations %v: want 2, a clean run", rep.FaultsPlayed, res.Failed(), rep.Violations)
	}
}

// The report lists the faults on servers from their fault_began and
// fault_ended alone: a fault_ended ends the latest of its kind on its
// target, and says what the fault did; a fault of an agent is not listed.
func TestCheckListsFaultsOnServers(t *testing.T) {
	h := Header{Format: FormatVersion, Scenario: "hand", Modes: []Mode{Fenced}, TTL: time.Second,
		Agents: []string{"agent-1"}, Resources: []string{"res-1"}}
	kill := NewFault("kill_primary", -1, "redis primary redis-0", 4*time.Second)
	killed := kill.Ended()
	killed.Outcome, killed.Detail = OutcomeFailedOver, "redis-2 promoted 2.2s after, redis-0 back as its replica"
	events := []Event{
		NewFault("partition", 0, "", time.Second),
		NewFault("restart", -1, TargetCoordinator, 0),
		{Kind: FaultBegan, Fault: "pause_leader", Agent: -1, Resource: -1, Other: -1, Target: "etcd leader", Dur: time.Second,
			Outcome: OutcomeNotPlayed, Detail: "not applied: no leader"},
		kill,
		killed,
	}
	for i := range events {
		events[i].Mode, events[i].At = Fenced, time.Duration(i)*time.Second
	}
	got := Check(h, events).Modes[Fenced].FaultsOnServers
	want := []FaultOnServer{
		{AtMS: 1000, Fault: "restart", Target: TargetCoordinator, EndedMS: -1},
		{AtMS: 2000, Fault: "pause_leader", Target: "etcd leader", DurationMS: 1000, Detail: "not applied: no leader", NotPlayed: true, EndedMS: -1},
		{AtMS: 3000, Fault: "kill_primary", Target: "redis primary redis-0", DurationMS: 4000, EndedMS: 4000, Ended: killed.Detail, FailedOver: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("faults on servers:\n got %+v\nwant %+v", got, want)
	}
	for i, line := range []string{
		"restart on coordinator at 1.000s",
		"pause_leader on etcd leader at 2.000s: not played: not applied: no leader",
		"kill_primary on redis primary redis-0 at 3.000s for 4.000s, ended at 4.000s: redis-2 promoted 2.2s after, redis-0 back as its replica",
	} {
		if got[i].String() != line {
			t.Errorf("line %d: %q, want %q", i, got[i].String(), line)
		}
	}
}
