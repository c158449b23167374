package harness_test

import (
	"slices"
	"testing"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// events keeps every event of a run.
type events []history.Event

func (es *events) Event(e history.Event) { *es = append(*es, e) }

// The simulator records every fault kind it plays (as the registry says)
// as the fault pair, in each mode: a partition from its beginning to its
// end on its agent, a restart as an instant of the coordinator just before
// the coordinator's new incarnation. A kind it plays with no scenario here
// fails the test.
func TestSimRecordsItsFaults(t *testing.T) {
	asks := map[spec.Fault]string{spec.FaultPartition: "partition", spec.FaultRestart: "restart-lost"}
	for _, k := range registry.Must(registry.Backends, registry.Sim).Faults() {
		if k.PerMessage() {
			continue // recorded message by message
		}
		name, ok := asks[k]
		if !ok {
			t.Errorf("the simulator plays %s, which no scenario of this test asks for", k)
			continue
		}
		sc := builtin(t, name)
		var got events
		run(t, sc, &got)
		for _, m := range []history.Mode{history.Naive, history.Fenced} {
			var faults []history.Event
			for i, e := range got {
				if e.Mode != m || !e.Kind.IsFault() {
					continue
				}
				faults = append(faults, e)
				if e.Fault != string(k) {
					t.Errorf("%s: a fault of kind %q", name, e.Fault)
				}
				if e.Fault == string(spec.FaultRestart) && (i+1 == len(got) || got[i+1].Kind != history.CoordinatorRestarted || got[i+1].At != e.At) {
					t.Errorf("%s: the restart's fault is not followed by the coordinator's new incarnation", name)
				}
			}
			if want := wantFaults(t, sc, k); !slices.EqualFunc(faults, want, sameFault) {
				t.Errorf("%s (%s): faults %+v, want %+v", name, m, faults, want)
			}
		}
	}
}

// wantFaults are the fault events a run of sc must have for kind k.
func wantFaults(t *testing.T, sc spec.Scenario, k spec.Fault) []history.Event {
	t.Helper()
	var out []history.Event
	switch k {
	case spec.FaultPartition:
		for _, p := range sc.Partitions {
			ai, _ := sc.AgentIndex(p.Agent)
			e := k.Began(ai, "", p.To-p.From)
			e.At = p.From
			end := e.Ended()
			end.At = p.To
			out = append(out, e, end)
		}
	case spec.FaultRestart:
		for _, r := range sc.Restarts {
			e := spec.RestartBegan(r.Persist)
			e.At = r.At
			out = append(out, e)
		}
	default:
		t.Fatalf("no fault events known for %s", k)
	}
	return out
}

func sameFault(a, b history.Event) bool {
	return a.Kind == b.Kind && a.Same(&b) && a.At == b.At && a.Dur == b.Dur && a.Detail == b.Detail && a.Outcome == b.Outcome
}
