package realtime_test

import (
	"bytes"
	"maps"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// The real-time runner records a partition as the fault pair on its agent
// and a restart as an instant of the coordinator just before the
// coordinator's new incarnation, in every mode; the history file reads
// back with them.
func TestRealtimeRecordsItsFaults(t *testing.T) {
	t.Parallel()
	sc := short(t, "partition", 20*time.Second, 0.1)
	sc.Restarts = []spec.Restart{{At: sc.Duration / 2, Persist: true}}
	res, file := runRecorded(t, sc, realtime.Options{})
	assertInvariants(t, res)
	checkRoundTrip(t, res, file)
	_, events, err := history.Decode(bytes.NewReader(file), "realtime.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	p := sc.Partitions[0]
	for _, m := range []history.Mode{history.Naive, history.Fenced} {
		kinds := make(map[string]int)
		var began, ended history.Event
		for i, e := range events {
			if e.Mode != m || !e.Kind.IsFault() {
				continue
			}
			kinds[e.Kind.String()+" "+e.Fault]++
			switch {
			case e.Fault == string(spec.FaultRestart):
				next := events[i+1]
				if e.Target != history.TargetCoordinator || e.Dur != 0 || next.Kind != history.CoordinatorRestarted || next.At != e.At {
					t.Errorf("%s: restart %+v, then %+v: want an instant of the coordinator, then its new incarnation", m, e, next)
				}
			case e.Kind == history.FaultBegan:
				began = e
			default:
				ended = e
			}
		}
		// The restart and the partition are timers apart: a loaded machine
		// may play them in either order.
		want := map[string]int{"fault_began partition": 1, "fault_began restart": 1, "fault_ended partition": 1}
		if !maps.Equal(kinds, want) {
			t.Fatalf("%s: faults %v, want %v", m, kinds, want)
		}
		if began.Agent != 0 || began.Dur != p.To-p.From || began.At < p.From || !began.Same(&ended) || ended.At < p.To {
			t.Errorf("%s: partition %+v to %+v, want agent-1's from %v to %v", m, began, ended, p.From, p.To)
		}
	}
}
