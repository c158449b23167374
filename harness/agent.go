package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// actor is one simulated agent: the agent state machine, and what the
// simulator keeps beside it (its partitions).
// The simulator carries out the agent's outputs on virtual time and the
// simulated network, and feeds it back its timers, replies and writes; it
// decides nothing the agent does.
type actor struct {
	ag         agent.Agent
	idx        int
	partitions int
	sim        *Sim // the simulation it is in: an actor is its agent's agent.Handler
}

// simClock is an agent's clock on virtual time: it reads
// offset + true*rate.
type simClock struct {
	leasefence.Clock
	d agent.Drift
}

func (c *simClock) reading(v time.Duration) time.Duration {
	return c.d.Offset + time.Duration(float64(v)*c.d.Rate)
}

// TrueAt is the first true instant at which the clock reads i.
func (c *simClock) TrueAt(i leasefence.Instant) time.Duration {
	return inverse(i.Offset(), c.d.Offset, c.d.Rate, c.reading)
}

func (s *Sim) initAgent(i int, scripted bool) error {
	a := &s.agents[i]
	a.idx, a.sim = i, s
	err := a.ag.Init(agent.Config{
		Scenario: &s.sc, Mode: s.mode, Discipline: s.header.Contender(s.mode).Discipline, Index: i, Scripted: scripted,
		Resources: s.header.Resources, AgentIndex: s.agentIndexOf, Lossy: s.mayLose(),
		Batch: &s.batch, // one goroutine feeds every agent, one input at a time
		Clock: func(name string, d agent.Drift) agent.Clock {
			c := &simClock{d: d}
			c.Clock = leasefence.NewClock(leasefence.Domain(name), func() time.Duration { return c.reading(s.now) })
			return c
		},
	})
	if err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	return nil
}

// drive carries out a batch of the agent's outputs, in order, and the
// batches that follow from its writes.
func (s *Sim) drive(a *actor, out []agent.Output) {
	for len(out) > 0 {
		w, ok := agent.Dispatch(out, a)
		if !ok || w == nil {
			return
		}
		landed := s.write(a, w.Token, w.Resource)
		if s.done {
			return // the write hit a library error
		}
		out = a.ag.Committed(s.now, landed)
	}
}

// Emit implements agent.Handler.
func (a *actor) Emit(e *history.Event) { a.sim.emitOwned(e) }

// Send implements agent.Handler.
func (a *actor) Send(r *agent.Request) { a.sim.send(a, r) }

// Arm implements agent.Handler.
func (a *actor) Arm(t agent.Timer, gen uint32, at time.Duration) {
	a.sim.schedule(at, timer{kind: timerKinds[t], agent: int32(a.idx), gen: gen})
}

// Failed implements agent.Handler.
func (a *actor) Failed(f *agent.Failure) { a.sim.libraryError(a.idx, f.Op, f.Err) }

// timerKinds maps the agent's timers to the engine's.
var timerKinds = [...]timerKind{
	agent.TimerStep: tAgentStep, agent.TimerRetry: tRetry, agent.TimerRenew: tRenew, agent.TimerStallEnd: tStallEnd,
}

// mayLose reports whether a message sent now could go unanswered.
func (s *Sim) mayLose() bool {
	return s.dropRequests > 0 || s.dropReplies > 0 || len(s.sc.Partitions) > 0
}

// write performs the agent's write under t on resource ri and reports
// whether it landed.
func (s *Sim) write(a *actor, t leasefence.Token, ri int) bool {
	res := &s.resources[ri]
	if s.naive {
		s.land(a, ri, t.Fence)
		return true
	}
	err := res.gate.Commit(context.Background(), t, func(context.Context) error {
		s.land(a, ri, t.Fence)
		return nil
	})
	if err == nil {
		return true
	}
	var floor leasefence.Rejection
	// The gate returns its refusal unwrapped; asserting the type directly
	// keeps the hot path free of the allocation errors.As's target costs.
	if stale, ok := err.(*leasefence.StaleFenceError); ok {
		floor = stale.Rejection
	} else if !errors.Is(err, leasefence.ErrTokenConflict) {
		s.libraryError(a.idx, "Commit", err)
		return false
	} else {
		fl := res.gate.Floor()
		floor = leasefence.Rejection{FloorHolder: fl.Holder, FloorFence: fl.Fence}
	}
	e := a.ag.Event(history.CommitRefused)
	e.Other, e.OtherFence = s.agentIndexOf(floor.FloorHolder), floor.FloorFence
	s.emit(e)
	return false
}

// land is a write landing at the resource. Whether it landed under a
// higher fence is the history's to say.
func (s *Sim) land(a *actor, ri int, f leasefence.Fence) {
	kind := history.CommitAdmitted
	if s.naive {
		kind = history.WriteLanded
	}
	e := a.ag.Event(kind)
	e.Fence = f
	s.emit(e)
}
