package procdriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// holdForever is two agents on one resource, each of which keeps the
// lease it gets (renewing it, writing without end), and the one of them
// that acquires first: the one whose first think time, as the agent state
// machine draws it, is shorter by far.
func holdForever(t *testing.T) (spec.Scenario, int) {
	sc, _ := spec.Builtin("overlap")
	sc.Agents, sc.Duration = 2, 6*time.Second
	sc.Agent.Stall = spec.Dist{Min: time.Millisecond, Max: 2 * time.Millisecond}
	sc.Agent.WritesPerLease = 1_000_000
	sc.Agent.WorkGap = spec.Uniform(50*time.Millisecond, 100*time.Millisecond)
	sc.Agent.RenewAt = 0.3
	for seed := uint64(1); seed < 100; seed++ {
		sc.Seed = seed
		var first [2]time.Duration
		for i := range first {
			a, err := agent.New(agent.Config{Scenario: &sc, Mode: history.Fenced, Index: i, Resources: []string{"r"},
				AgentIndex: func(string) int { return -1 },
				Clock: func(name string, d agent.Drift) agent.Clock {
					return realtime.NewAgentClock(name, d, func() time.Duration { return 0 })
				}})
			if err != nil {
				t.Fatal(err)
			}
			first[i] = a.Start(0)[0].At
		}
		if d := first[0] - first[1]; d > 150*time.Millisecond || d < -150*time.Millisecond {
			return sc, map[bool]int{true: 0, false: 1}[first[0] < first[1]]
		}
	}
	t.Fatal("no seed below 100 draws first think times 150ms apart")
	return sc, 0
}

// A killed agent's lease expires at the coordinator and the other agent
// takes the resource over; the killed agent comes back as a new process,
// late enough (3s after the kill, the lease long expired and the other
// agent retrying every quarter second) that it cannot win the lease back
// first.
//
// The kill is asked for as an option, and as the scenario's crash.
func TestKilledAgentLeaseTakenOver(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"option", "scenario"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			sc, holder := holdForever(t)
			crash := spec.Crash{Agent: spec.AgentName(holder), At: 2 * time.Second, Restart: 3 * time.Second}
			var kills []spec.Crash
			if how == "option" {
				kills = []spec.Crash{crash}
			} else {
				sc.Crashes = []spec.Crash{crash}
			}
			s := setup(t, registry.SQLite, sc)
			var events []history.Event
			res := run(t, s, procdriver.Options{Modes: []history.Mode{history.Fenced}, Kills: kills,
				Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) { events = append(events, e) })}})
			assertInvariants(t, res)
			if p := res.Processes[history.Fenced]; p.Killed != 1 || p.Started != 3 {
				t.Errorf("processes %+v: want 1 killed and 3 started", p)
			}
			var expired, takenOver bool
			for _, e := range events {
				switch {
				case e.Kind == history.Expired && e.Agent == holder && e.At >= 2*time.Second:
					expired = true
				case e.Kind == history.Granted && e.Agent != holder && expired:
					takenOver = true
				}
			}
			if !expired || !takenOver {
				t.Errorf("after the kill of %s at 2s: its lease expired %v, taken over %v", crash.Agent, expired, takenOver)
			}
			assertCrashRecorded(t, events, holder)
		})
	}
}

// assertCrashRecorded checks that the history has the crash of agent, at
// 2s and restarted 3s later, as the fault pair: one fault_began of kind
// crash on the agent, lasting 3s, and its fault_ended no sooner.
func assertCrashRecorded(t *testing.T, events []history.Event, agent int) {
	t.Helper()
	var began, ended []history.Event
	for _, e := range events {
		switch {
		case e.Kind == history.FaultBegan:
			began = append(began, e)
		case e.Kind == history.FaultEnded:
			ended = append(ended, e)
		}
	}
	if len(began) != 1 || len(ended) != 1 {
		t.Fatalf("faults began %+v, ended %+v: want the crash's one of each", began, ended)
	}
	b, e := began[0], ended[0]
	if b.Fault != string(spec.FaultCrash) || b.Agent != agent || b.Dur != 3*time.Second || b.At < 2*time.Second || !b.Same(&e) ||
		e.At-b.At < 3*time.Second {
		t.Errorf("crash recorded as %+v, ended %+v: want %s's crash at 2s or after, for 3s", b, e, spec.AgentName(agent))
	}
}

// The parent plays its actions at their instants, with the run's context;
// one that fails fails the run, naming it.
func TestActions(t *testing.T) {
	t.Parallel()
	sc := overlap(2 * time.Second)
	sc.Agents = 1
	s := setup(t, registry.SQLite, sc)
	var at time.Duration
	start := time.Now()
	r, err := procdriver.New(s, procdriver.Options{Modes: []history.Mode{history.Fenced}, Actions: []procdriver.Action{
		{At: 500 * time.Millisecond, Name: "note", Do: func(ctx context.Context) error { at = time.Since(start); return ctx.Err() }},
		{At: time.Second, Name: "partition nothing", Do: func(context.Context) error { return errors.New("no such member") }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "partition nothing at 1s: no such member") {
		t.Errorf("run: %v, want the failed action named", err)
	}
	// Counted from before the processes started, so only its earliest
	// instant is known: a loaded machine may take seconds to start them.
	if at < 500*time.Millisecond {
		t.Errorf("the action at 500ms ran at %v", at)
	}
}
