package realtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// stuckLock's Acquire blocks until stop is closed, whatever its context
// says.
type stuckLock struct{ stop chan struct{} }

func (l stuckLock) Acquire(context.Context, string, string, time.Duration) (realtime.Lease, error) {
	<-l.stop
	return nil, errors.New("stopped")
}

// A contender whose Acquire never returns, run beside the lab's fenced
// mode as lab run runs contenders: the run ends a grace after its
// duration with a NeverReturnedError naming the contender's calls alone,
// each recorded as its library error. The fenced mode runs to the end,
// its coordinator restarted on time (a restart does not wait for a lock
// that no restart touches), and it is charged nothing.
func TestContenderThatNeverReturns(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	sc, _ := spec.Builtin("overlap")
	sc.Duration = time.Second
	sc.Restarts = []spec.Restart{{At: 500 * time.Millisecond, Persist: true}}
	stuck := &realtime.Contender{Info: history.Contender{Name: "stuck", Library: "test", Discipline: history.DisciplineNaive},
		New: func(context.Context, history.Mode) (realtime.Lock, error) { return stuckLock{stop}, nil }}
	const grace = 200 * time.Millisecond
	var kept []history.Event
	r, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{history.Fenced, "stuck"}, Backend: realtime.NewMemory(),
		Contenders: map[history.Mode]*realtime.Contender{"stuck": stuck}, Grace: grace,
		Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) { kept = append(kept, e) })}})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	res, err := r.Run(t.Context())
	took := time.Since(began)
	var never *realtime.NeverReturnedError
	if !errors.As(err, &never) || !errors.Is(err, realtime.ErrNeverReturned) {
		t.Fatalf("Run returned %v after %s: want a NeverReturnedError", err, took)
	}
	t.Logf("after %s: %v", took, err)
	if took > 10*time.Second {
		t.Errorf("Run took %s for a 1s run and a %s grace", took, grace)
	}
	for _, c := range never.Calls {
		if c.Mode != "stuck" || c.Call != "Acquire" || !strings.HasPrefix(c.Agent, "agent-") || c.Resource != "res-1" {
			t.Errorf("stuck call %+v: want only the contender's acquires", c)
		}
	}
	if !strings.Contains(err.Error(), "scenario overlap: agent-") || !strings.Contains(err.Error(), "(mode stuck)") {
		t.Errorf("the error does not name the scenario, the agent and the mode: %v", err)
	}
	f, s := res.Modes[history.Fenced], res.Modes["stuck"]
	if f.Acquisitions == 0 || len(f.Violations) != 0 {
		t.Errorf("fenced: %d acquisitions, violations %v: want it run and charged nothing", f.Acquisitions, f.Violations)
	}
	if len(s.Violations) == 0 || !strings.Contains(strings.Join(s.Violations, "; "), "Acquire of res-1 never returned") {
		t.Errorf("the contender's violations %v do not say its Acquire never returned", s.Violations)
	}
	restarted := false
	for _, e := range kept {
		restarted = restarted || e.Mode == history.Fenced && e.Kind == history.CoordinatorRestarted
	}
	if !restarted {
		t.Error("the fenced mode's coordinator was not restarted: the restart waited for the stuck calls")
	}
	errs := 0
	for _, e := range kept {
		if e.Kind == history.LibraryError {
			errs++
			if e.Mode != "stuck" {
				t.Errorf("a library error in mode %s: %s", e.Mode, e.Detail)
			}
		}
	}
	if errs != len(never.Calls) {
		t.Errorf("%d library errors kept for %d calls that never returned", errs, len(never.Calls))
	}
}
