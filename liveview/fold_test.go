package liveview_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/spec"
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

// The faults a run plays are in the snapshot, whatever their kind, each
// in force from its beginning to its end; an instant is never in force,
// nor one that could not be played; an intervention is no fault.
func TestFoldFaults(t *testing.T) {
	h := history.Header{Agents: []string{"agent-1"}, Resources: []string{"res-1"}, Modes: []history.Mode{history.Fenced}}
	f := liveview.New(&h, history.Fenced, 0)
	for _, e := range []history.Event{
		{Kind: history.FaultBegan, At: 3 * time.Second, Agent: -1, Resource: -1, Other: -1, Fault: "pause_leader",
			Target: "etcd member 1 (the leader)", Dur: 2500 * time.Millisecond},
		{Kind: history.FaultBegan, At: 3 * time.Second, Agent: 0, Resource: -1, Other: -1, Fault: "partition", Dur: 5 * time.Second},
		{Kind: history.FaultBegan, At: 4 * time.Second, Agent: -1, Resource: -1, Other: -1, Fault: "restart", Target: "coordinator"},
		{Kind: history.FaultEnded, At: 4500 * time.Millisecond, Agent: 0, Resource: -1, Other: -1, Fault: "partition"},
		{Kind: history.FaultBegan, At: 8 * time.Second, Agent: -1, Resource: -1, Other: -1, Fault: "partition_member",
			Target: "etcd member 3", Dur: 3 * time.Second, Outcome: history.OutcomeNotPlayed, Detail: "no leader"},
		{Kind: history.Intervened, At: 9 * time.Second, Agent: -1, Resource: -1, Other: -1,
			Intervention: &history.Intervention{Kind: history.SetDropRate, Value: 0.5}},
	} {
		f.Add(&e)
	}
	snap := f.Snapshot(10 * time.Second)
	if len(snap.Faults) != 4 {
		t.Fatalf("faults %+v: want the pause, the partition, the restart and the fault not played, not the drop rate", snap.Faults)
	}
	if got := snap.Faults[1]; got.Target != "agent-1" || got.Kind != "partition" || got.End != 4500*time.Millisecond {
		t.Errorf("partition %+v: want agent-1's, ended at 4.5s", got)
	}
	if got := snap.Faults[3]; got.NotPlayed != "no leader" {
		t.Errorf("fault not played: %+v", got)
	}
	for _, tc := range []struct {
		fault int
		at    time.Duration
		want  bool
	}{{0, 2999 * time.Millisecond, false}, {0, 3 * time.Second, true}, {0, 5499 * time.Millisecond, true}, {0, 5500 * time.Millisecond, false},
		{1, 4 * time.Second, true}, {1, 4500 * time.Millisecond, false}, {2, 4 * time.Second, false}, {3, 9 * time.Second, false}} {
		if got := snap.Faults[tc.fault].Active(tc.at); got != tc.want {
			t.Errorf("fault %d active at %v = %v, want %v", tc.fault, tc.at, got, tc.want)
		}
	}
}

// Every fault kind reaches the snapshot, on an agent or on a target,
// in force between its beginning and its end: the fold knows no kind.
func TestFoldEveryFaultKind(t *testing.T) {
	h := history.Header{Agents: []string{"agent-1"}, Resources: []string{"res-1"}, Modes: []history.Mode{history.Fenced}}
	f := liveview.New(&h, history.Fenced, 0)
	var at time.Duration
	for _, k := range spec.Faults {
		for _, e := range []history.Event{k.Began(0, "", time.Second), k.Began(-1, "etcd member 9", time.Second)} {
			e.At = at
			f.Add(&e)
			end := e.Ended()
			end.At = at + 500*time.Millisecond
			f.Add(&end)
		}
		at += time.Second
	}
	snap := f.Snapshot(at)
	if len(snap.Faults) != 2*len(spec.Faults) {
		t.Fatalf("%d faults in the snapshot, want %d: %+v", len(snap.Faults), 2*len(spec.Faults), snap.Faults)
	}
	for i, k := range spec.Faults {
		for j, target := range []string{"agent-1", "etcd member 9"} {
			got := snap.Faults[2*i+j]
			from := time.Duration(i) * time.Second
			if got.Kind != string(k) || got.Target != target || got.At != from || got.End != from+500*time.Millisecond ||
				!got.Active(from) || got.Active(from+500*time.Millisecond) {
				t.Errorf("%s on %s: %+v, want it in force from %v to %v", k, target, got, from, from+500*time.Millisecond)
			}
		}
	}
}
