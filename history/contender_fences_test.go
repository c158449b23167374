package history

import "testing"

// A library's lock orders its generations on each resource (czxids,
// create revisions), and the lab records its grants as their replies
// come back to it. So two grants on different resources are no reuse
// however their fences compare; a grant below the resource's newest is
// one the lock made earlier and the lab recorded late (an agent's process
// paused right after its lock answered): it took over nothing, and is
// neither a reuse nor a mutual-exclusion violation. A fence equal to one
// minted before on the resource is still a reuse. The lab's own
// coordinator's grants on one resource are recorded in its order: there
// fence 15 after 18 and fence 20 after 20 are reuses, and the late grant
// a violation; fence 18 on res-2 after 20 on res-1 is none, since the
// record of a real-time history is not its order across resources
// (TestFencesInTheCoordinatorsOrder).
func TestContenderFencesPerResource(t *testing.T) {
	h, events, err := ReadFile("testdata/contender_fences_per_resource.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rep := Check(h, events)
	for mode, want := range map[Mode]struct{ reuses, exclusion int }{Fenced: {2, 1}, "zookeeper-fenced": {1, 0}} {
		r := rep.Modes[mode]
		if r.FenceReuses != want.reuses || r.UnexcusedFenceReuses != want.reuses || r.MutualExclusionViolations != want.exclusion {
			t.Errorf("%s: %d fences reused (%d unexcused), %d mutual-exclusion violations; want %d reused, %d violations",
				mode, r.FenceReuses, r.UnexcusedFenceReuses, r.MutualExclusionViolations, want.reuses, want.exclusion)
		}
	}
}

// A grant recorded late still has a lease the lock stated: the newer grant,
// made after it, took over from it, and is a violation when it came before
// that lease's Deadline. Here fence 15, made before fence 18 on res-2 and
// recorded at 500 ms, ran until 800 ms by the lock's own word, and fence 18
// was granted at 10 ms.
func TestLateGrantStillJudgesTheTakeover(t *testing.T) {
	h, events, err := ReadFile("testdata/contender_late_grant_overlaps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := Check(h, events).Modes["zookeeper-fenced"]
	if r.MutualExclusionViolations != 1 {
		t.Fatalf("%d mutual-exclusion violations, want 1: fence 18 was granted at 10 ms while fence 15's lease ran until 800 ms", r.MutualExclusionViolations)
	}
	for _, cx := range r.Counterexamples {
		if cx.Kind == MutualExclusionViolation && cx.Fence == 18 && cx.OtherFence == 15 && cx.UntilMS == 800 {
			return
		}
	}
	t.Fatalf("counterexamples %+v, want fence 18 granted inside fence 15's lease, until 800 ms", r.Counterexamples)
}
