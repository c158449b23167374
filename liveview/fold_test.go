package liveview_test

import (
	"testing"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// The fold shows what the history says: its totals at the end of a run
// are the checker's counts of the same events, and the gap's refused write
// is in the rejection log, numbered as its gate logged it.
func TestFoldAgreesWithTheChecker(t *testing.T) {
	for _, name := range []string{"gap", "overlap", "push"} {
		t.Run(name, func(t *testing.T) {
			sc, rep, snap := foldRun(t, name, history.Fenced)
			got := snap.Totals
			if got.Acquisitions != rep.Acquisitions || got.CommitsAdmitted != rep.CommitsAdmitted ||
				got.CommitsRefused != rep.CommitsRefused || got.StaleWritesLanded != rep.StaleWritesLanded ||
				got.Expiries != rep.Expiries || snap.Events != uint64(rep.Events) {
				t.Errorf("fold totals %+v (%d events), checker %+v", got, snap.Events, rep)
			}
			if len(snap.Refusals) != min(rep.CommitsRefused, liveview.MaxSnapshotRefusals) {
				t.Errorf("%d refusals in the log, %d refused", len(snap.Refusals), rep.CommitsRefused)
			}
			for i, r := range snap.Refusals {
				if r.Seq == 0 || i > 0 && r.Resource == snap.Refusals[i-1].Resource && r.Seq <= snap.Refusals[i-1].Seq {
					t.Errorf("refusal %d numbered %d", i, r.Seq)
				}
			}
			if len(snap.Agents) != sc.Agents || len(snap.Lanes) != sc.Agents || len(snap.Holders) != sc.Resources {
				t.Errorf("snapshot of %d agents, %d lanes, %d holders", len(snap.Agents), len(snap.Lanes), len(snap.Holders))
			}
		})
	}
}

// Forged writes are totalled apart from the gate's refusals of stale
// fences, and never enter the gate's refusal log.
func TestFoldCountsForgeriesApart(t *testing.T) {
	h, events, err := history.ReadFile("../history/testdata/forgeries_fenced.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f := liveview.New(&h, history.Fenced, 0)
	for i := range events {
		f.Add(&events[i])
	}
	snap := f.Snapshot(h.Duration)
	if got := snap.Totals; got.ForgeriesRefused != 1 || got.ForgeriesLanded != 2 || got.CommitsRefused != 0 || len(snap.Refusals) != 0 {
		t.Errorf("totals %+v, %d refusals logged: want 1 forgery refused, 2 landed, no stale refusal", got, len(snap.Refusals))
	}
}
