package harness_test

import (
	"reflect"
	"testing"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
)

// TestFoldBesideTheEngineIsTheInlineFold checks that the checker folding a
// simulation's events on a goroutine of its own, in batches, reaches the
// verdict a checker fed each event as it is emitted reaches: the same digest
// whenever it is read, mid-batch or on a batch's edge, and the same report
// at the end. A fold that lost, repeated or reordered events of a batch, or
// the engine's unfinished one, would differ.
func TestFoldBesideTheEngineIsTheInlineFold(t *testing.T) {
	sc := builtin(t, "crowd")
	for _, mode := range harness.Modes {
		t.Run(string(mode), func(t *testing.T) {
			var seen []history.Event
			sim, err := harness.NewSim(sc, mode, history.SubscriberFunc(func(e history.Event) { seen = append(seen, e) }))
			if err != nil {
				t.Fatal(err)
			}
			h := sim.Header()
			inline := history.NewChecker(&h, mode)
			folded, reads := 0, 0
			for step := 1; sim.Step(); step++ {
				// Read at irregular points, so that some reads fall inside
				// a batch and some on its edge.
				if step%997 != 0 && step%1024 != 0 {
					continue
				}
				for ; folded < len(seen); folded++ {
					inline.Add(&seen[folded])
				}
				if got, want := sim.Digest(), inline.Digest(); got != want {
					t.Fatalf("after %d events: digest %s beside the engine, %s inline", len(seen), got, want)
				}
				reads++
			}
			for ; folded < len(seen); folded++ {
				inline.Add(&seen[folded])
			}
			if reads < 10 || len(seen) < 20*1024 {
				t.Fatalf("%d events read %d times: too few to cross batches", len(seen), reads)
			}
			got, want := sim.Report(), inline.Report()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("report beside the engine:\n%+v\ninline:\n%+v", got, want)
			}
			if got.Events != uint64(len(seen)) {
				t.Fatalf("the report counts %d events, the subscriber saw %d", got.Events, len(seen))
			}
		})
	}
}
