package history

import "testing"

// A library's lock orders its fences on each resource (czxids, create
// revisions): two grants on different resources, recorded by the lab in
// the order their replies came back, are not a reuse however their
// fences compare. A fence at or below one minted before on the same
// resource still is. The lab's own coordinator mints from one counter:
// out of order across resources is a reuse there.
func TestContenderFencesPerResource(t *testing.T) {
	h, events, err := ReadFile("testdata/contender_fences_per_resource.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rep := Check(h, events)
	for mode, want := range map[Mode]int{Fenced: 2, "zookeeper-fenced": 1} {
		if r := rep.Modes[mode]; r.FenceReuses != want || r.UnexcusedFenceReuses != want {
			t.Errorf("%s: %d fences reused (%d unexcused), want %d", mode, r.FenceReuses, r.UnexcusedFenceReuses, want)
		}
	}
}
