package history_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// exclusionEvents: agent-1's acquire is sent at 0 with a network delay
// of delay and granted at grantAt until grantAt+1s; agent-2's is sent at
// 1s and granted at second. A history of one mode, "lock", on one
// resource.
func exclusionEvents(delay, grantAt, second time.Duration) []history.Event {
	ev := func(at time.Duration, k history.Kind, agent int, f uint64, id string) history.Event {
		e := history.Event{At: at, Mode: "lock", Kind: k, Agent: agent, Resource: 0, Other: -1, Fence: leasefence.Fence(f), RequestID: id}
		if k == history.RequestSent {
			e.Request = history.RequestAcquire
		}
		if k == history.Granted {
			e.Deadline = at + time.Second
		}
		return e
	}
	sent := ev(0, history.RequestSent, 0, 0, "a")
	sent.Dur = delay
	return []history.Event{
		sent,
		ev(grantAt, history.Granted, 0, 1, "a"),
		ev(time.Second, history.RequestSent, 1, 0, "b"),
		ev(second, history.Granted, 1, 2, "b"),
	}
}

// The checker's Report counts what MutualExclusion finds, with its
// evidence; a real-time history is judged by the earliest instant the
// earlier lease can have ended, so a slow reply does not make a grant
// look early, while the simulator's exact times are judged as they are.
func TestMutualExclusionInReport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		backend  string
		delay    time.Duration // agent-1's request's time on the way to the server
		grantAt  time.Duration // agent-1's grant, recorded when its reply came
		second   time.Duration // agent-2's grant
		violates bool
	}{
		{"sim: granted before the lease ran out", "sim", 0, 0, 900 * time.Millisecond, true},
		{"sim: granted after", "sim", 0, 0, 1100 * time.Millisecond, false},
		// agent-1's reply took 50ms: its lease may have ended at 1s.
		{"real: granted inside the reply's uncertainty", "memory", 0, 50 * time.Millisecond, 1020 * time.Millisecond, false},
		{"real: granted before any end the record allows", "memory", 0, 50 * time.Millisecond, 980 * time.Millisecond, true},
		// agent-1's request took 40ms to reach the server, which cannot
		// have granted it before: the lease ran until 1040ms at the
		// earliest, and a grant at 1020ms broke it.
		{"real: the request's own delay is no uncertainty", "memory", 40 * time.Millisecond, 50 * time.Millisecond, 1020 * time.Millisecond, true},
		{"real: granted after the earliest end from the arrival", "memory", 40 * time.Millisecond, 50 * time.Millisecond, 1045 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := contenderHeader("lock")
			h.Backend = tc.backend
			h.Agents = []string{"agent-1", "agent-2"}
			h.Contenders = []history.Contender{{Name: "lock", Discipline: history.DisciplineNaive}}
			events := exclusionEvents(tc.delay, tc.grantAt, tc.second)
			rep := history.Check(h, events).Modes["lock"]
			n, xs := history.MutualExclusion(&h, events)
			if rep.MutualExclusionViolations != n || (n > 0) != tc.violates {
				t.Fatalf("report counts %d, MutualExclusion %d: want a violation %v", rep.MutualExclusionViolations, n, tc.violates)
			}
			if rep.Contender.Name != "lock" || rep.Contender.Discipline != history.DisciplineNaive {
				t.Errorf("the report's contender %+v", rep.Contender)
			}
			if !tc.violates {
				return
			}
			var found bool
			for _, x := range rep.Counterexamples {
				found = found || (x.Kind == history.MutualExclusionViolation && x.Holder == "agent-2" && x.Other == "agent-1" && x.UntilMS > x.AtMS)
			}
			if !found || xs[0].Kind != history.MutualExclusionViolation {
				t.Errorf("no counterexample with the evidence: %+v", rep.Counterexamples)
			}
			// The lock's own safety: a violation of the mode whatever its
			// discipline, so the run fails.
			if want := "1 mutual-exclusion violation" + history.ExclusionViolation; !slices.Contains(rep.Violations, want) {
				t.Errorf("violations %q, want %q", rep.Violations, want)
			}
		})
	}
}

// A coordinator restart forgets every lease: a grant after it, while the
// earlier lease would still have run, is the restart's, not the lock's.
func TestMutualExclusionAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		restartAt time.Duration // -1: none
		violates  bool
	}{
		{"no restart", -1, true},
		{"a restart between the grants", 500 * time.Millisecond, false},
		{"a restart after the second grant", 950 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := contenderHeader("lock")
			h.Backend = "sim"
			h.Agents = []string{"agent-1", "agent-2"}
			h.Contenders = []history.Contender{{Name: "lock", Discipline: history.DisciplineNaive}}
			events := exclusionEvents(0, 0, 900*time.Millisecond)
			if tc.restartAt >= 0 {
				r := history.Event{At: tc.restartAt, Mode: "lock", Kind: history.CoordinatorRestarted, Agent: -1, Resource: -1, Other: -1,
					Outcome: history.OutcomeCounterPersisted}
				i, _ := slices.BinarySearchFunc(events, r.At, func(e history.Event, at time.Duration) int { return cmp.Compare(e.At, at) })
				events = slices.Insert(events, i, r)
			}
			rep := history.Check(h, events).Modes["lock"]
			if got := rep.MutualExclusionViolations > 0; got != tc.violates || (len(rep.Violations) > 0) != tc.violates {
				t.Errorf("%d violations of exclusion (%q), want any: %v", rep.MutualExclusionViolations, rep.Violations, tc.violates)
			}
		})
	}
}
