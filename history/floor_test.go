package history

import (
	"slices"
	"testing"
)

// A gate's floor is its own: after a coordinator restart that lost the
// counter, the reissued fence 1 is the coordinator's excuse, not the
// gate's, and a gate that admits it after admitting fence 32 broke its
// invariant. testdata/admitted_below_own_floor.jsonl is the simulator's
// restart-lost (seed 1, fenced, to 10.2s) with the gate's refusal of
// agent-5@1 turned into an admission; the honest run, the same history
// with the refusal put back, holds.
func TestGateAdmitsBelowItsOwnFloor(t *testing.T) {
	h, events, err := ReadFile("testdata/admitted_below_own_floor.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(events, func(e Event) bool { return e.Kind == CommitAdmitted && e.Fence == 1 && e.Incarnation == 1 })
	if i < 0 {
		t.Fatal("no admission of the reissued fence 1")
	}
	honest := slices.Clone(events)
	honest[i].Kind, honest[i].Other, honest[i].OtherFence = CommitRefused, slices.Index(h.Agents, "agent-2"), 32

	for _, tc := range []struct {
		name   string
		events []Event
		want   int
	}{
		{"the gate admitted fence 1 after fence 32", events, 1},
		{"the honest gate refused it", honest, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(h, tc.events)
			r := res.Modes[Fenced]
			if r.AdmittedBelowOwnFloor != tc.want || res.Failed() != (tc.want > 0) {
				t.Fatalf("%d admitted below the gate's own floor (violations %q), want %d", r.AdmittedBelowOwnFloor, r.Violations, tc.want)
			}
			if tc.want == 0 {
				return
			}
			if !slices.Contains(r.Violations, "1 commit admitted below a fence the same gate had admitted") {
				t.Errorf("violations %q", r.Violations)
			}
			j := slices.IndexFunc(r.Counterexamples, func(x Counterexample) bool { return x.Kind == AdmittedBelowFloor })
			if j < 0 || r.Counterexamples[j].Holder != "agent-5" || r.Counterexamples[j].Other != "agent-2" || r.Counterexamples[j].OtherFence != 32 {
				t.Errorf("counterexamples %+v", r.Counterexamples)
			}
		})
	}
}
