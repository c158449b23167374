package harness

import (
	"strings"
	"testing"

	"github.com/leasefence/lab/spec"

	"github.com/leasefence/lab/history"
)

// An error the library should never return does not crash the simulator:
// the run ends there, the history records it, and the checker reports it as
// a violation, so the run fails like a broken invariant would (lab run and
// lab swarm then print the reproducing command).
func TestLibraryErrorFailsTheRun(t *testing.T) {
	for _, mode := range []history.Mode{history.Naive, history.Fenced} {
		t.Run(string(mode), func(t *testing.T) {
			sc, _ := spec.Builtin("gap")
			var last history.Event
			sim, err := NewSim(sc, mode, history.SubscriberFunc(func(e history.Event) { last = e }))
			if err != nil {
				t.Fatal(err)
			}
			// Run until the coordinator has answered the first acquire,
			// then forge its reply in flight: a grant for another holder,
			// which completing is an error the library returns.
			forged := false
			for !forged && sim.Step() {
				for i := range sim.msgs {
					if m := &sim.msgs[i]; m.kind == history.RequestAcquire && m.acqOut.OK {
						m.acqOut.Grant.Token.Holder = "someone-else"
						forged = true
					}
				}
			}
			if !forged {
				t.Fatal("no acquire was answered")
			}
			for sim.Step() {
			}
			if last.Kind != history.LibraryError || !strings.HasPrefix(last.Detail, "CompleteAcquire: ") {
				t.Fatalf("last event %+v, want a library_error naming CompleteAcquire", last)
			}
			if sim.Now() >= sc.Duration {
				t.Errorf("the run went on to %v after the error", sim.Now())
			}
			h := sc.Header([]history.Mode{mode})
			res := history.NewResult(&h)
			res.Add(sim.Report())
			if !res.Failed() || len(res.Violations()) != 1 || !strings.Contains(res.Violations()[0], "CompleteAcquire") {
				t.Fatalf("failed %v, violations %q", res.Failed(), res.Violations())
			}
		})
	}
}
