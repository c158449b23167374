package realtime

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// driver is one agent of a real-time run: the agent state machine, fed one
// input at a time under its lock, and the real timers, calls and writes
// its outputs ask for. The driver decides nothing the agent does: it
// sleeps until a timer is due, carries a request through the fault layer to
// the coordinator and its reply back, and lands a write at the resource.
type driver struct {
	w     *world
	idx   int
	name  string
	clock *agentClock

	mu   sync.Mutex // guards ag and dead, and orders the agent's inputs
	ag   agent.Agent
	dead bool // the agent met a library or store error: it takes no more input

	partitions atomic.Int32 // > 0 while cut off
	dropMu     sync.Mutex
	dropReqs   float64
	dropReps   float64
	stats      faultCounters
	wireDelays *rand.Rand // draws network.write_delay, under mu
}

// agentClock is an agent's clock on the wall clock: the monotonic time
// since the run began, at the agent's drift, from its offset. A negative
// offset is taken up by a constant so that the clock never reads below
// zero.
type agentClock struct {
	leasefence.Clock
	offset time.Duration
	rate   float64
}

// TrueAt is the true instant at which the clock reads i.
func (c *agentClock) TrueAt(i leasefence.Instant) time.Duration {
	return time.Duration(math.Ceil(float64(i.Offset()-c.offset) / c.rate))
}

func newDriver(w *world, i int, scripted bool) (*driver, error) {
	r := w.r
	d := &driver{w: w, idx: i, name: r.h.Agents[i], dropReqs: r.sc.Network.DropRequests, dropReps: r.sc.Network.DropReplies,
		// Its own stream, seeded by the run and the agent: the k-th write
		// of an agent is as slow on the wire in both modes.
		wireDelays: rand.New(rand.NewPCG(r.sc.Seed, wireStream+uint64(i)))}
	err := d.ag.Init(agent.Config{
		Scenario: &r.sc, Mode: w.mode, Discipline: w.discipline, Index: i, Scripted: scripted, Resources: r.h.Resources,
		AgentIndex: func(name string) int { return agentIndex(r.h.Agents, name) },
		// Any call can go unanswered in real time (a store that does not
		// answer in time): every acquire has its retry timer.
		Lossy: true,
		Clock: func(name string, dr agent.Drift) agent.Clock {
			start := r.start
			d.clock = newAgentClock(name, dr, func() time.Duration { return time.Since(start) })
			return d.clock
		},
	})
	if err != nil {
		return nil, fmt.Errorf("realtime: %w", err)
	}
	return d, nil
}

// start begins the agent: its first input, and its script's actions at
// their instants.
func (d *driver) start(ctx context.Context) {
	d.feed(func(now time.Duration) []agent.Output { return d.ag.Start(now) })
	if !d.ag.Scripted() {
		return
	}
	var acts []spec.Action
	for _, act := range d.w.r.sc.Script {
		if act.Agent == d.name {
			acts = append(acts, act)
		}
	}
	slices.SortStableFunc(acts, func(a, b spec.Action) int { return cmp.Compare(a.At, b.At) })
	d.script(acts)
}

// script arms the first of acts, which hands it to the agent and then
// arms the rest: each action is armed once the one before it was carried
// out, so that two actions of one instant come in the order written.
func (d *driver) script(acts []spec.Action) {
	if len(acts) == 0 {
		return
	}
	d.w.r.after(acts[0].At, d.idx, func(context.Context) {
		d.feed(func(now time.Duration) []agent.Output { return d.ag.Script(now, acts[0]) })
		d.script(acts[1:])
	})
}

// feed hands the agent one input, at the current true instant, and carries
// out what it returns.
func (d *driver) feed(input func(now time.Duration) []agent.Output) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead || d.w.r.over() {
		return
	}
	d.carry(input(d.w.r.now()))
}

// carry carries out the agent's outputs, in order; d.mu is held.
func (d *driver) carry(out []agent.Output) {
	if w, ok := agent.Dispatch(out, d); ok && w != nil {
		d.write(w.Token, w.Resource)
	}
}

// Emit implements agent.Handler; d.mu is held.
func (d *driver) Emit(e *history.Event) { d.emit(*e) }

// Send implements agent.Handler; d.mu is held.
func (d *driver) Send(r *agent.Request) { d.send(*r) }

// Arm implements agent.Handler; d.mu is held.
func (d *driver) Arm(t agent.Timer, gen uint32, at time.Duration) { d.arm(t, at, gen) }

// Failed implements agent.Handler: the agent is dead; d.mu is held.
func (d *driver) Failed(f *agent.Failure) {
	d.libraryError(f.Op, f.Err)
	d.dead = true
}

func (d *driver) emit(e history.Event) { d.w.r.emit(d.w.mode, e) }

// arm fires the agent's timer at the true instant at.
func (d *driver) arm(t agent.Timer, at time.Duration, gen uint32) {
	d.w.r.after(at, d.idx, func(context.Context) {
		d.feed(func(now time.Duration) []agent.Output { return d.ag.Fire(now, t, gen) })
	})
}

// libraryError records an error the library never should return; the
// agent stops.
func (d *driver) libraryError(call string, err error) {
	d.emit(history.Event{Kind: history.LibraryError, Agent: d.idx, Resource: d.ag.Resource(), Other: -1,
		Detail: fmt.Sprintf("%s: %s: %v", d.name, call, err)})
}

// setDropRate sets both drop probabilities, for the messages that follow.
func (d *driver) setDropRate(p float64) {
	d.dropMu.Lock()
	d.dropReqs, d.dropReps = p, p
	d.dropMu.Unlock()
}

func (d *driver) dropRates() (reqs, reps float64) {
	d.dropMu.Lock()
	defer d.dropMu.Unlock()
	return d.dropReqs, d.dropReps
}

// wireStream is where the agents' streams of write delays begin.
const wireStream = 0x77697265 << 16

// write lands the agent's write under t on resource ri, beside the agent,
// and hands it the outcome; d.mu is held. The write's context carries the
// agent's lease, whose proof a resource across a network is shown, and
// the delay the write meets on the wire.
func (d *driver) write(t leasefence.Token, ri int) {
	tmpl := d.ag.Event(history.CommitAdmitted)
	lease := leasefence.Lease{Token: t}
	if l, _ := d.ag.Lease(); l != nil && l.Token == t {
		lease = *l
	}
	delay := d.w.r.sc.Network.WriteDelay.Sample(d.wireDelays)
	d.w.r.spawn(func(ctx context.Context) {
		ctx = WithWireDelay(WithLease(ctx, lease), delay)
		fate, call, err := d.w.land(ctx, tmpl, t, ri)
		switch {
		case ctx.Err() != nil:
			// The run is over: what the write became is the resource's
			// record's to say, and the history ends here.
		case err != nil:
			d.feed(func(now time.Duration) []agent.Output { return d.ag.WriteFailed(now, call, err) })
		default:
			d.feed(func(now time.Duration) []agent.Output { return d.ag.Committed(now, fate.Landed) })
		}
	})
}

// writeTimeout is the least time a write is given before the store is
// taken to have failed it.
const writeTimeout = 10 * time.Second

// land makes one write at resource ri: through the gate in fenced mode,
// straight at the resource in naive mode, beside every other write, and
// says what became of it; an error is the store's, with the call that
// failed. tmpl is the event of the write, as the agent describes it; the
// history's landing is built from the resource's own record of it.
func (w *world) land(ctx context.Context, tmpl history.Event, t leasefence.Token, ri int) (Fate, string, error) {
	r := w.r
	// A write is not bounded by the TTL: a slow write is the very gap the
	// gate is for. Only a store that does not answer in time fails it.
	wctx, cancel := context.WithTimeout(ctx, max(10*r.sc.TTL, writeTimeout))
	defer cancel()
	id := w.writes.add(&tmpl)
	fate, call, err := Land(wctx, w.resources[ri], w.discipline, t, id)
	switch {
	case err != nil:
	case fate.Landed:
		tmpl.Kind = LandingKind(w.discipline)
		r.emitLive(w.mode, tmpl)
	default:
		r.emit(w.mode, fate.Refusal(tmpl, r.h.Agents))
	}
	return fate, call, err
}

// stall is a live stall of the agent, for d from now.
func (d *driver) stall(dur time.Duration) {
	d.feed(func(now time.Duration) []agent.Output { return d.ag.Stall(now, dur) })
}
