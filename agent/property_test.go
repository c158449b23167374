package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// world is a minimal driver: agents on one true clock with no drift, a
// real coordinator and real gates, a network whose fate every agent draws,
// and a queue of pending inputs. It checks the agent's promises as it
// carries out its outputs.
type world struct {
	t      *testing.T
	sc     spec.Scenario
	now    time.Duration
	seq    int
	queue  []pending
	coord  *leasefence.Coordinator
	gates  []*leasefence.FenceGate
	agents []*agent.Agent
	log    strings.Builder

	expiry  map[leasefence.Fence]time.Duration // the coordinator's expiry of each grant, true time
	checked map[int]leasefence.Fence           // the fence of each agent's last passed check
	writes  map[int]int                        // writes under each agent's current lease
}

type pending struct {
	at  time.Duration
	seq int
	do  func()
}

func (w *world) after(at time.Duration, do func()) {
	w.seq++
	w.queue = append(w.queue, pending{at, w.seq, do})
}

func (w *world) run() {
	for len(w.queue) > 0 {
		i := 0
		for j, p := range w.queue {
			if p.at < w.queue[i].at || p.at == w.queue[i].at && p.seq < w.queue[i].seq {
				i = j
			}
		}
		p := w.queue[i]
		w.queue = slices.Delete(w.queue, i, i+1)
		if p.at > w.sc.Duration {
			return
		}
		w.now = p.at
		p.do()
	}
}

// drive carries out a batch of agent i's outputs, checking each.
func (w *world) drive(i int, out []agent.Output) {
	a := w.agents[i]
	for k, o := range out {
		fmt.Fprintf(&w.log, "%v %d %s\n", w.now, i, describe(out[k:k+1]))
		switch o.Kind {
		case agent.Emit:
			w.emitted(i, o.Event)
		case agent.Arm:
			if o.At < w.now {
				w.t.Fatalf("agent %d armed %v for %v, before now %v", i, o.Timer, o.At, w.now)
			}
			t, gen := o.Timer, o.Gen
			w.after(o.At, func() { w.drive(i, a.Fire(w.now, t, gen)) })
		case agent.Send:
			w.send(i, *o.Request)
		case agent.Write:
			if k != len(out)-1 {
				w.t.Fatalf("agent %d: a write is not the last output of its batch", i)
			}
			if w.checked[i] != o.Write.Token.Fence {
				w.t.Fatalf("agent %d writes under fence %d, its last passed check was under %d", i, o.Write.Token.Fence, w.checked[i])
			}
			if w.writes[i]++; w.writes[i] > w.sc.Agent.WritesPerLease {
				w.t.Fatalf("agent %d wrote %d times under one lease", i, w.writes[i])
			}
			w.checked[i] = 0
			err := w.gates[o.Write.Resource].Commit(context.Background(), o.Write.Token, func(context.Context) error { return nil })
			w.drive(i, a.Committed(w.now, err == nil))
			return
		case agent.Failed:
			w.t.Fatalf("agent %d: library error %s: %v", i, o.Failure.Op, o.Failure.Err)
		}
	}
}

func (w *world) emitted(i int, e *history.Event) {
	if e.Agent != i {
		w.t.Fatalf("agent %d emitted an event for agent %d", i, e.Agent)
	}
	switch e.Kind {
	case history.CheckPassed:
		w.checked[i] = e.Fence
	case history.Acquired, history.Renewed:
		if e.Kind == history.Acquired {
			w.writes[i] = 0
		}
		// Send-time anchoring: with no drift and no skew, the agent never
		// believes past the coordinator's expiry.
		if exp, ok := w.expiry[e.Fence]; ok && e.Deadline > exp {
			w.t.Fatalf("agent %d believes fence %d until %v, past the coordinator's %v", i, e.Fence, e.Deadline, exp)
		}
	}
}

func (w *world) send(i int, r agent.Request) {
	a := w.agents[i]
	f := a.DrawSend(&r, w.sc.Network.DropRequests)
	if f.Lost {
		return
	}
	var acq leasefence.AcquireRequest
	var ren leasefence.RenewRequest
	switch r.Kind {
	case history.RequestAcquire:
		acq = a.PendingAcquire()
	case history.RequestRenew:
		ren = a.PendingRenewal()
	}
	w.after(w.now+f.RequestDelay, func() {
		var reply func()
		switch r.Kind {
		case history.RequestAcquire:
			out, err := w.coord.Acquire(acq)
			if err != nil {
				w.t.Fatal(err)
			}
			if out.OK {
				w.expiry[out.Grant.Token.Fence] = out.Grant.CoordinatorExpiresAt.Offset()
			}
			reply = func() { w.drive(i, a.AcquireReplied(w.now, acq.RequestID, out, 0)) }
		case history.RequestRenew:
			out, err := w.coord.Renew(ren)
			if err != nil {
				w.t.Fatal(err)
			}
			if out.OK {
				w.expiry[out.Grant.Token.Fence] = out.Grant.CoordinatorExpiresAt.Offset()
			}
			reply = func() { w.drive(i, a.RenewReplied(w.now, ren.RequestID, out)) }
		case history.RequestRelease:
			if _, err := w.coord.Release(r.Release); err != nil {
				w.t.Fatal(err)
			}
			return
		}
		if !a.DrawReplyLost(w.sc.Network.DropReplies) {
			w.after(w.now+f.ReplyDelay, reply)
		}
	})
}

func newWorld(t *testing.T, seed uint64) *world {
	sc, _ := spec.Builtin("overlap")
	sc.Seed, sc.Agents, sc.Resources, sc.Duration = seed, 3, 2, 20*time.Second
	sc.ClockSkew = 0
	sc.Network.DropReplies, sc.Network.RetryAfter, sc.Network.MaxRetries = 0.2, 300*time.Millisecond, 2
	sc.Agent.Release = seed%2 == 0
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, sc: sc, expiry: map[leasefence.Fence]time.Duration{},
		checked: map[int]leasefence.Fence{}, writes: map[int]int{}}
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: leasefence.NewClock("coordinator", func() time.Duration { return w.now }), TTL: sc.TTL})
	if err != nil {
		t.Fatal(err)
	}
	w.coord = c
	h := sc.Header([]history.Mode{history.Fenced})
	for _, r := range h.Resources {
		w.gates = append(w.gates, leasefence.NewFenceGate(r))
	}
	for i := range sc.Agents {
		a, err := agent.New(agent.Config{
			Scenario: &w.sc, Mode: history.Fenced, Index: i, Resources: h.Resources, Lossy: true,
			AgentIndex: func(string) int { return -1 },
			Clock: func(name string, d agent.Drift) agent.Clock {
				return &clock{d: d, Clock: leasefence.NewClock(leasefence.Domain(name), func() time.Duration {
					return d.Offset + time.Duration(float64(w.now)*d.Rate)
				})}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		w.agents = append(w.agents, a)
	}
	for i, a := range w.agents {
		w.drive(i, a.Start(0))
	}
	return w
}

// Over many seeds, the agent keeps its promises: it arms no timer in the
// past, writes only under the lease of its last passed check and at most
// writes_per_lease times, puts a write last in its batch, never believes
// past the coordinator's expiry (send-time anchoring), and the same seed
// gives the same outputs, output for output.
func TestPropertiesOverSeeds(t *testing.T) {
	seeds := uint64(60)
	if testing.Short() {
		seeds = 10
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		w := newWorld(t, seed)
		w.run()
		again := newWorld(t, seed)
		again.run()
		if w.log.String() != again.log.String() {
			t.Fatalf("seed %d: two runs differ", seed)
		}
		if !strings.Contains(w.log.String(), "write") {
			t.Fatalf("seed %d: no agent wrote", seed)
		}
	}
}
