package history

import (
	"testing"
)

// A runner that records a refusal before the landing of the floor it names
// is caught: in a run of restart-lost on the in-memory backend (its fenced
// mode kept), agent-6's write 68 under fence 27 raised the gate's floor,
// and agent-2's write 69 under fence 23 was refused by it and its refusal
// recorded, all before write 68's landing was (the resource answered the
// refusal before it recorded the write that raised its floor, which
// realtime's TestMemoryAnswersAfterItsFloorLanded now holds it to). At the
// refusal the history shows agent-6@27 never admitted: unexplained.
func TestRefusalRecordedBeforeItsFloorLanded(t *testing.T) {
	h, events, err := ReadFile("testdata/refused_before_its_floor_landed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	refusal, landing := -1, -1
	for i, e := range events {
		switch {
		case e.Kind == CommitRefused && e.RequestID == "69":
			refusal = i
		case e.Kind == CommitAdmitted && e.RequestID == "68":
			landing = i
		}
	}
	if refusal < 0 || landing < refusal || events[refusal].Other != 5 || events[refusal].OtherFence != 27 ||
		events[landing].Agent != 5 || events[landing].Fence != 27 {
		t.Fatalf("write 69's refusal (event %d) and write 68's landing (event %d): want the refusal by agent-6@27 first, then agent-6@27's landing", refusal, landing)
	}
	r := Check(h, events).Modes[Fenced]
	if r.UnexplainedRefusals != 1 || len(r.Counterexamples) == 0 {
		t.Fatalf("%d unexplained refusals, counterexamples %+v; want 1", r.UnexplainedRefusals, r.Counterexamples)
	}
	var found bool
	for _, cx := range r.Counterexamples {
		if cx.Kind == UnexplainedRefusal {
			found = true
			if cx.Holder != "agent-2" || cx.Fence != 23 || cx.Other != "agent-6" || cx.OtherFence != 27 || cx.AtMS != ms(events[refusal].At) {
				t.Errorf("counterexample %+v, want agent-2@23 refused by agent-6@27 at %vms", cx, ms(events[refusal].At))
			}
		}
	}
	if !found {
		t.Errorf("counterexamples %+v, want an unexplained refusal", r.Counterexamples)
	}
}
