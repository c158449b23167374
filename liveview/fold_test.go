package liveview_test

import (
	"testing"
	"time"

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

// The etcd member faults a run plays are in the snapshot, each in force
// from its instant for its duration; one that could not be played never is.
func TestFoldMemberFaults(t *testing.T) {
	h := history.Header{Agents: []string{"agent-1"}, Resources: []string{"res-1"}, Modes: []history.Mode{history.Fenced}}
	f := liveview.New(&h, history.Fenced, 0)
	for _, e := range []history.Event{
		{Kind: history.Intervened, At: 3 * time.Second, Agent: -1, Resource: -1, Other: -1,
			Intervention: &history.Intervention{Kind: history.PauseMember, Member: 1, Leader: true, Duration: 2500 * time.Millisecond}},
		{Kind: history.Intervened, At: 8 * time.Second, Agent: -1, Resource: -1, Other: -1,
			Intervention: &history.Intervention{Kind: history.PartitionMember, Member: 3, Duration: 3 * time.Second}, Detail: "not applied: no leader"},
		{Kind: history.Intervened, At: 9 * time.Second, Agent: -1, Resource: -1, Other: -1,
			Intervention: &history.Intervention{Kind: history.SetDropRate, Value: 0.5}},
	} {
		f.Add(&e)
	}
	snap := f.Snapshot(4 * time.Second)
	if len(snap.MemberFaults) != 2 {
		t.Fatalf("member faults %+v: want the pause and the partition, not the drop rate", snap.MemberFaults)
	}
	for _, tc := range []struct {
		fault int
		at    time.Duration
		want  bool
	}{{0, 2999 * time.Millisecond, false}, {0, 3 * time.Second, true}, {0, 5499 * time.Millisecond, true}, {0, 5500 * time.Millisecond, false},
		{1, 9 * time.Second, false}} {
		if got := snap.MemberFaults[tc.fault].Active(tc.at); got != tc.want {
			t.Errorf("fault %d active at %v = %v, want %v", tc.fault, tc.at, got, tc.want)
		}
	}
}
