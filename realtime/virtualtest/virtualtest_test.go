package virtualtest_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

func builtin(t *testing.T, name string) spec.Scenario {
	t.Helper()
	sc, ok := spec.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %q", name)
	}
	return sc
}

// In a bubble, each target gives the verdicts in kind that its real-time
// runs give on overlap (realtime's and redislocks' tests, on the in-memory
// backend and on redis-servers): a naive discipline lands stale writes, a
// fenced one none, and no lock breaks mutual exclusion.
func TestVerdictsInKind(t *testing.T) {
	for _, tc := range []struct {
		target virtualtest.Target
		naive  []history.Mode
		fenced []history.Mode
	}{
		{virtualtest.Memory(), []history.Mode{history.Naive}, []history.Mode{history.Fenced}},
		{virtualtest.Redis(), []history.Mode{history.Naive}, []history.Mode{history.Fenced}},
		{virtualtest.Contender(registry.Redsync), []history.Mode{registry.Redsync}, nil},
		{virtualtest.Contender(registry.Redislock), []history.Mode{registry.Redislock}, nil},
		{virtualtest.Contender(registry.Redlock), []history.Mode{registry.Redlock}, nil},
	} {
		t.Run(tc.target.Name, func(t *testing.T) {
			o := virtualtest.Run(t, builtin(t, "overlap"), tc.target, virtualtest.Config{})
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			if v := o.Result.Violations(); len(v) > 0 {
				t.Errorf("violations: %q", v)
			}
			for _, m := range tc.naive {
				// 60 s of overlap lands about 25: far from none.
				if rep := o.Result.Modes[m]; rep.StaleWritesLanded < 5 || rep.Acquisitions < 30 {
					t.Errorf("%s: %d stale writes landed in %d acquisitions: want the naive discipline's", m, rep.StaleWritesLanded, rep.Acquisitions)
				}
			}
			for _, m := range tc.fenced {
				if rep := o.Result.Modes[m]; rep.StaleWritesLanded != 0 || rep.CommitsRefused == 0 {
					t.Errorf("%s: %d stale writes landed, %d refused: want the gate to refuse them all", m, rep.StaleWritesLanded, rep.CommitsRefused)
				}
			}
			t.Logf("%s: 60 s of overlap in %v of wall time", tc.target.Name, o.Wall)
		})
	}
}

// alone runs lock alone, naive, as mode name; restartable, a restart
// concerns it (it restarts nothing), so that its calls hold a restart off.
func alone(name string, lock realtime.Lock, restartable bool) virtualtest.Target {
	return virtualtest.Target{Name: name, Open: func(*testing.T, spec.Scenario) (realtime.Options, error) {
		c := &realtime.Contender{Info: history.Contender{Name: history.Mode(name), Library: name, Discipline: history.DisciplineNaive,
			Generations: realtime.GenerationsObserved},
			New: func(context.Context, history.Mode) (realtime.Lock, error) { return lock, nil }}
		if restartable {
			c.OnRestart = func(context.Context, bool) error { return nil }
		}
		return realtime.Options{Modes: []history.Mode{history.Mode(name)}, Backend: c}, nil
	}}
}

// A restart waits for the calls under way to the lock it concerns, and
// those calls wait on the bubble's clock: the restart's wait must let the
// clock go on, and the run end as in real time.
func TestRestartBesideCallsThatWait(t *testing.T) {
	for _, name := range []string{"restart-lost", "restart-persisted"} {
		o := virtualtest.Run(t, builtin(t, name), alone("sleepy", &sleepyLock{wait: 50 * time.Millisecond}, true), virtualtest.Config{Watchdog: time.Second})
		if o.Err != nil {
			t.Fatalf("%s: %v", name, o.Err)
		}
		var restarted int
		for _, e := range o.Events {
			if e.Kind == history.CoordinatorRestarted {
				restarted++
			}
		}
		if restarted != len(builtin(t, name).Restarts) {
			t.Errorf("%s: %d restarts recorded, want %d", name, restarted, len(builtin(t, name).Restarts))
		}
	}
}

// A lock that holds a sync.Mutex across a wait on the clock, or waits on
// a real socket, blocks the bubble for good (a goroutine waiting on
// either is not durably blocked, so the clock stops): the run is abandoned
// on the wall clock, and its failure names the scenario, the seed and the
// calls under way, with the history recorded until then. A call that
// blocks durably (on a channel, heeding no context) ends the run after
// its grace, in virtual time.
func TestBlockedBubbleIsNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	for _, tc := range []struct {
		name    string
		lock    realtime.Lock
		stalled bool // the clock stops; else the call blocks durably, and its grace runs out
	}{
		{"mutex", &sleepyLock{wait: time.Millisecond, mutexAcross: true}, true},
		{"socket", socketLock{addr: ln.Addr().String()}, true},
		{"channel", blockedLock{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			begun := time.Now()
			o := virtualtest.Run(t, builtin(t, "overlap"), alone(tc.name, tc.lock, false), virtualtest.Config{Watchdog: 500 * time.Millisecond})
			if took := time.Since(begun); took > 10*time.Second {
				t.Errorf("the run took %v to be abandoned, with a 500ms watchdog", took)
			}
			var never *realtime.NeverReturnedError
			if !errors.As(o.Err, &never) || never.Stalled != tc.stalled || len(never.Calls) == 0 {
				t.Fatalf("err %v: want a run with calls that never returned (stalled: %v)", o.Err, tc.stalled)
			}
			why := "after the run's end"
			if tc.stalled {
				why = "clock stopped"
			}
			msg := o.Err.Error()
			for _, want := range []string{"scenario overlap", "seed 1", "Acquire of res-1", "(mode " + tc.name + ")", why} {
				if !strings.Contains(msg, want) {
					t.Errorf("the failure %q does not say %q", msg, want)
				}
			}
			var stuck int
			for _, e := range o.Events {
				if e.Kind == history.LibraryError && strings.Contains(e.Detail, "never returned") {
					stuck++
				}
			}
			if stuck != len(never.Calls) || len(o.Events) == 0 || o.Result == nil {
				t.Errorf("the history kept %d events, %d library errors for %d calls under way", len(o.Events), stuck, len(never.Calls))
			}
			if _, err := o.History(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A lock whose call panics is the library's error of the agent that made
// the call, in the history, with the run going on: not a test binary
// ended by the panic, its history lost.
func TestPanickingLock(t *testing.T) {
	o := virtualtest.Run(t, builtin(t, "overlap"), alone("panicky", &sleepyLock{wait: time.Millisecond, panicIn: "Renew"}, false), virtualtest.Config{})
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	var panics int
	for _, e := range o.Events {
		if e.Kind == history.LibraryError && strings.HasPrefix(e.Detail, "agent-") && strings.Contains(e.Detail, "Renew: realtime: the contender broke the Lock contract: Renew panicked: sleepy: Renew of a lease") {
			panics++
		}
	}
	if panics == 0 || len(o.Result.Violations()) == 0 {
		t.Errorf("%d library errors for the panics, violations %q: want the panics recorded and failing the run", panics, o.Result.Violations())
	}
}
