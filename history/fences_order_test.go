package history

import (
	"testing"

	"github.com/leasefence/lab/leasefence"
)

// The lab's coordinator mints from one counter, and fences must strictly
// increase on each resource in its order. A real-time history records
// grants on different resources as their replies come back, which is not
// that order: a lower fence recorded after a higher one on another
// resource is no reuse, unless the higher one's grant was recorded before
// the lower one's request was sent.
//
// fences_reply_order_across_resources is lab run contend --backend redis
// (16 agents, 8 resources, two rounds of concurrent acquires), whose
// replies came back out of the counter's order: fences 15 (res-7) and 14
// (res-5) of the second round before fences 9 to 13. Nothing was reused. fences_reissued_across_resources is the same run with fence 16
// of agent-16 on res-8 rewritten to 8, minted (res-5) and recorded 1.1s
// before agent-16 sent its request: a counter that went back, caught
// though res-8 had only fence 1 before. In fences_reissued_after_lost_restart
// the same kind of reissue follows a restart that lost the counter,
// recorded after the request was sent: a reuse the restart excuses.
func TestFencesInTheCoordinatorsOrder(t *testing.T) {
	for _, tc := range []struct {
		file              string
		mode              Mode
		reuses, unexcused int
		fence, other      leasefence.Fence // the first reuse's fences
	}{
		{"fences_reply_order_across_resources", Fenced, 0, 0, 0, 0},
		{"fences_reply_order_across_resources", Naive, 0, 0, 0, 0},
		{"fences_reissued_across_resources", Fenced, 1, 1, 8, 8},
		{"fences_reissued_after_lost_restart", Fenced, 1, 0, 3, 5},
	} {
		t.Run(tc.file+"/"+string(tc.mode), func(t *testing.T) {
			h, events, err := ReadFile("testdata/" + tc.file + ".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			r := Check(h, events).Modes[tc.mode]
			if r.FenceReuses != tc.reuses || r.UnexcusedFenceReuses != tc.unexcused {
				t.Fatalf("%d fences reused (%d unexcused), want %d (%d unexcused); counterexamples %+v",
					r.FenceReuses, r.UnexcusedFenceReuses, tc.reuses, tc.unexcused, r.Counterexamples)
			}
			for _, cx := range r.Counterexamples {
				if cx.Kind == FenceReuse {
					if cx.Fence != tc.fence || cx.OtherFence != tc.other {
						t.Errorf("fence %d reused after fence %d, want %d after %d", cx.Fence, cx.OtherFence, tc.fence, tc.other)
					}
					return
				}
			}
			if tc.reuses > 0 {
				t.Errorf("no fence-reuse counterexample, want fence %d after %d", tc.fence, tc.other)
			}
		})
	}
}
