package procdriver

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// RunIfChild makes the process a child and exits when its arguments are
// ChildArg's; otherwise it returns at once. Call it first thing in main
// (or TestMain) of a program that runs agents as processes.
func RunIfChild() {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		os.Exit(childMain(os.Stdin, os.Stdout, os.Stderr))
	}
}

// childMain runs one agent of one mode until the run's end, or until its
// stdin closes (the parent is gone).
func childMain(stdin io.Reader, stdout io.Writer, stderr io.Writer) int {
	in := bufio.NewReader(stdin)
	cfg, err := readConfig(in)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	// Opening what the agent needs is bounded; the parent's end of the
	// pipe closing ends the wait for the start.
	opening, opened := context.WithTimeout(context.Background(), time.Minute)
	c, err := newChild(opening, cfg, stdout)
	opened()
	if err != nil {
		fmt.Fprintf(stderr, "procdriver: %s (%s): %v\n", spec.AgentName(cfg.Agent), cfg.Mode, err)
		return 1
	}
	start, err := readStart(in)
	if err != nil {
		c.close()
		return 2
	}
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(cfg.Scenario.Duration))
	defer cancel()
	acks := make(chan struct{})
	go func() {
		// Each line is the parent's word that a stall may go on; the end
		// of the stream is the parent gone.
		for {
			if _, err := in.ReadBytes('\n'); err != nil {
				cancel()
				return
			}
			select {
			case acks <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	c.start, c.ctx, c.acks = start, ctx, acks
	c.run()
	return c.close()
}

// child is one agent's process: the agent state machine, fed one input at
// a time under mu, and the real timers, calls and writes its outputs ask
// for, as the in-process runner's driver carries them out.
type child struct {
	cfg   childConfig
	sc    *spec.Scenario
	start time.Time
	ctx   context.Context
	acks  <-chan struct{}
	// backend is the run's, attached (nil when neither the mode's
	// coordinator nor the store is in it); contender the mode's library
	// lock, attached (nil for the lab's own modes).
	backend   realtime.Backend
	contender *realtime.Contender
	store     realtime.Store
	svc       func() leasefence.Service
	res       []realtime.Resource
	wg        sync.WaitGroup

	mu       sync.Mutex // guards the fields below, and orders the agent's inputs
	ag       agent.Agent
	dead     bool
	writes   uint64
	coordEnd time.Duration // the coordinator's expiry of the lease held, as last seen

	outMu sync.Mutex
	enc   *history.Encoder
	last  time.Duration
	err   error
}

// newChild opens what the agent needs and makes it, then writes the
// history header to the parent: the child is ready to start.
func newChild(ctx context.Context, cfg childConfig, stdout io.Writer) (*child, error) {
	c := &child{cfg: cfg, sc: &cfg.Scenario}
	if cfg.Life > 0 {
		c.sc.Seed ^= uint64(cfg.Life) * 0x9e3779b97f4a7c15
	}
	if err := c.attach(ctx); err != nil {
		c.close()
		return nil, err
	}
	for _, name := range cfg.Header.Resources {
		r, err := c.store.Resource(ctx, cfg.Mode, name, c.now)
		if err != nil {
			c.close()
			return nil, err
		}
		c.res = append(c.res, r)
	}
	err := c.ag.Init(agent.Config{
		Scenario: c.sc, Mode: cfg.Mode, Discipline: cfg.Header.Contender(cfg.Mode).Discipline, Index: cfg.Agent, Scripted: cfg.Scripted, Resources: cfg.Header.Resources,
		AgentIndex: func(name string) int { return slices.Index(cfg.Header.Agents, name) },
		Lossy:      true, // any call can go unanswered in real time
		Clock: func(name string, d agent.Drift) agent.Clock {
			return realtime.NewAgentClock(name, d, c.now)
		},
	})
	if err == nil {
		c.enc, err = history.NewEncoder(stdout, cfg.Header)
	}
	if err == nil {
		err = c.enc.Flush()
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// attach reaches what the run's process opened: the mode's coordinator
// (the run's backend, or the mode's library lock) and the store.
func (c *child) attach(ctx context.Context) error {
	cfg := c.cfg
	var err error
	var coord realtime.Backend
	if cfg.ContenderShare != "" {
		if c.contender, err = realtime.AttachContender(ctx, string(cfg.Mode), cfg.ContenderShare); err != nil {
			return err
		}
		coord = c.contender
	}
	if store, ok := registry.Lookup(registry.Stores, cfg.Store); coord == nil || ok && len(store.RunsOn) > 0 {
		if c.backend, err = realtime.AttachBackend(ctx, cfg.Backend, cfg.BackendShare); err != nil {
			return err
		}
	}
	if coord == nil {
		coord = c.backend
	}
	// The coordinator keeps its own time (procdriver.Check refuses a
	// drift of it): true time since the run began.
	if c.svc, err = realtime.OpenCoordinator(ctx, coord, cfg.Mode, realtime.CoordinatorClock(c.now), *c.sc); err != nil {
		return err
	}
	c.store, err = realtime.AttachStore(ctx, cfg.Store, cfg.StoreShare, c.backend)
	return err
}

// now is true time since the run began, on the wall clock every process of
// the run shares.
func (c *child) now() time.Duration { return time.Since(c.start) }

// run starts the agent and returns when the run is over and every
// goroutine it started has returned.
func (c *child) run() {
	c.feed(func(now time.Duration) []agent.Output { return c.ag.Start(now) })
	if c.cfg.Scripted {
		var acts []spec.Action
		for _, act := range c.sc.Script {
			if act.Agent == spec.AgentName(c.cfg.Agent) {
				acts = append(acts, act)
			}
		}
		slices.SortStableFunc(acts, func(a, b spec.Action) int { return cmp.Compare(a.At, b.At) })
		c.spawn(func() {
			for _, act := range acts {
				if sleep(c.ctx, act.At-c.now()) != nil {
					return
				}
				c.feed(func(now time.Duration) []agent.Output { return c.ag.Script(now, act) })
			}
		})
	}
	<-c.ctx.Done()
	c.wg.Wait()
}

// close closes what the child opened, and returns its exit code.
func (c *child) close() int {
	if c.store != nil {
		c.store.Close()
	}
	if c.contender != nil {
		c.contender.Close()
	}
	if c.backend != nil {
		c.backend.Close()
	}
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.err != nil {
		return 1
	}
	return 0
}

func (c *child) spawn(f func()) {
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// feed hands the agent one input, at the current true instant, and carries
// out what it returns.
func (c *child) feed(input func(now time.Duration) []agent.Output) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.ctx.Err() != nil {
		return
	}
	if w, ok := agent.Dispatch(input(c.now()), c); ok && w != nil {
		c.write(w.Token, w.Resource)
	}
}

// Emit implements agent.Handler: a stall's beginning waits for the
// parent's pause; c.mu is held.
func (c *child) Emit(e *history.Event) {
	c.emit(*e, c.now())
	if e.Kind == history.StallBegan {
		c.awaitPause()
	}
}

// Send implements agent.Handler; c.mu is held.
func (c *child) Send(r *agent.Request) { c.send(*r) }

// Arm implements agent.Handler; c.mu is held.
func (c *child) Arm(t agent.Timer, gen uint32, at time.Duration) { c.arm(t, at, gen) }

// Failed implements agent.Handler: the agent is dead; c.mu is held.
func (c *child) Failed(f *agent.Failure) {
	c.failure(fmt.Sprintf("%s: %v", f.Op, f.Err))
	c.dead = true
}

// awaitPause waits, having told the parent of the stall, for its word: it
// stops the whole process for the stall's length before it gives it, so
// the pause falls here, between the check and the write. c.mu is held.
func (c *child) awaitPause() {
	select {
	case <-c.acks:
	case <-c.ctx.Done():
	}
}

// emit writes e to the parent, stamped at true instant at (never before
// the previous event: the stream is in order). Nothing is written once
// the run is over: the history ends where the run did.
func (c *child) emit(e history.Event, at time.Duration) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.err != nil || c.ctx.Err() != nil {
		return
	}
	e.Mode, e.At = c.cfg.Mode, max(at, c.last)
	c.last = e.At
	if c.err = c.enc.Encode(&e); c.err == nil {
		c.err = c.enc.Flush()
	}
}

// failure records an error the library never should return.
func (c *child) failure(detail string) {
	c.emit(history.Event{Kind: history.LibraryError, Agent: c.cfg.Agent, Resource: c.ag.Resource(), Other: -1,
		Detail: spec.AgentName(c.cfg.Agent) + ": " + detail}, c.now())
}

// arm fires the agent's timer at true instant at.
func (c *child) arm(t agent.Timer, at time.Duration, gen uint32) {
	c.spawn(func() {
		if sleep(c.ctx, at-c.now()) == nil {
			c.feed(func(now time.Duration) []agent.Output { return c.ag.Fire(now, t, gen) })
		}
	})
}

// write announces the agent's write to the parent (the event its landing
// would be, the write's id as its request id), then makes it beside the
// agent and hands it the outcome. c.mu is held.
func (c *child) write(t leasefence.Token, ri int) {
	c.writes++
	id, ok := newIDLayout(c.cfg.Scenario).id(c.cfg.Agent, c.cfg.Life, c.writes)
	if !ok {
		// The parent's Check makes this unreachable: no run lasts long
		// enough. A write with no id of its own is never made.
		c.failure(fmt.Sprintf("write %d of process %d has no id of its own; it is not made", c.writes, c.cfg.Life+1))
		return
	}
	tmpl := c.ag.Event(realtime.LandingKind(c.cfg.Header.Contender(c.cfg.Mode).Discipline))
	tmpl.RequestID = realtime.WriteRequestID(id) // the landing's and the refusal's: one write
	c.emit(tmpl, c.now())
	c.spawn(func() {
		// A write is not bounded by the TTL: a slow write is the very gap
		// the gate is for. Only a store that does not answer is an error.
		wctx, cancel := context.WithTimeout(c.ctx, max(10*c.sc.TTL, 10*time.Second))
		defer cancel()
		fate, call, err := realtime.Land(wctx, c.res[ri], c.cfg.Header.Contender(c.cfg.Mode).Discipline, t, id)
		switch {
		case c.ctx.Err() != nil:
			return // the run is over: the resource's record says what the write became
		case err != nil:
			c.feed(func(now time.Duration) []agent.Output { return c.ag.WriteFailed(now, call, err) })
			return
		case !fate.Landed:
			c.emit(fate.Refusal(tmpl, c.cfg.Header.Agents), c.now())
		}
		c.feed(func(now time.Duration) []agent.Output { return c.ag.Committed(now, fate.Landed) })
	})
}

// sleep waits d, or until ctx ends, as the in-process runner does.
var sleep = realtime.Sleep
