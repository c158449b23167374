package liveview_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/spec"
)

// foldRun runs the built-in scenario name in mode m, folding its events,
// and returns the checker's report and the fold's snapshot at the end.
func foldRun(t *testing.T, name string, m history.Mode) (spec.Scenario, *history.Report, liveview.Snapshot) {
	t.Helper()
	sc, _ := spec.Builtin(name)
	h := sc.Header([]history.Mode{m})
	f := liveview.New(&h, m, sc.Network.DropRequests)
	res, err := harness.Run(context.Background(), sc, harness.RunOptions{Modes: []history.Mode{m},
		Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) { f.Add(&e) })}})
	if err != nil {
		t.Fatal(err)
	}
	return sc, res.Modes[m], f.Snapshot(sc.Duration)
}

// TestFoldNaiveWrites: naive mode has no gate; the fold says what landed
// on each resource and lists the stale landings, over whom. In the gap,
// agent-1's write under fence 1 lands at 1.400s over agent-2's under 2.
// The counts agree with the checker's.
func TestFoldNaiveWrites(t *testing.T) {
	for _, name := range []string{"gap", "overlap"} {
		t.Run(name, func(t *testing.T) {
			sc, rep, snap := foldRun(t, name, history.Naive)
			if snap.Gates != nil || len(snap.Writes) != sc.Resources {
				t.Fatalf("%d gates and %d write counts, want none and one per resource", len(snap.Gates), len(snap.Writes))
			}
			landed, stale := 0, 0
			for _, w := range snap.Writes {
				landed, stale = landed+w.Landed, stale+w.Stale
			}
			if landed != rep.CommitsAdmitted || stale != rep.StaleWritesLanded || len(snap.StaleWrites) != min(stale, liveview.MaxSnapshotRefusals) {
				t.Errorf("%d landed, %d stale, %d listed; the checker has %d landed, %d stale", landed, stale, len(snap.StaleWrites), rep.CommitsAdmitted, rep.StaleWritesLanded)
			}
			if name != "gap" {
				return
			}
			want := liveview.StaleWriteView{At: 1400 * time.Millisecond, Resource: "res-1", Writer: "agent-1", Fence: 1, Over: "agent-2", OverFence: 2}
			if len(snap.StaleWrites) != 1 || snap.StaleWrites[0] != want {
				t.Errorf("stale writes %+v, want [%+v]", snap.StaleWrites, want)
			}
		})
	}
}
