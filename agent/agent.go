package agent

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// Drift is how an agent's clock relates to true time: it reads
// Offset + true*Rate.
type Drift struct {
	Rate   float64
	Offset time.Duration
}

// Clock is an agent's clock as its driver keeps it: the leasefence.Clock
// the agent's Client reads, and the way back from a reading to the driver's
// true time. TrueAt returns the first true instant at which the clock reads
// i or more; the agent uses it only to say in the history until when it
// believes in a lease.
type Clock interface {
	leasefence.Clock
	TrueAt(i leasefence.Instant) time.Duration
}

// Config is what an agent is made from.
type Config struct {
	// Scenario is the run's scenario, already valid; the agent only reads
	// it, and shares it with the other agents.
	Scenario *spec.Scenario
	Mode     history.Mode
	// Discipline is how the mode's contender writes (the header's
	// Contender); "" takes the lab's own naive or fenced by Mode.
	Discipline history.Discipline
	Index      int // the agent's index in the header's agents
	// Scripted agents do only what the scenario's script says (the driver
	// hands each action to Script at its instant).
	Scripted bool
	// Resources are the resource names, by index (the header's).
	Resources []string
	// AgentIndex maps an agent's name to its index, or -1.
	AgentIndex func(name string) int
	// Clock makes the agent's clock from the drift drawn for it.
	Clock func(name string, d Drift) Clock
	// Lossy says whether the network can lose a message when the run
	// begins; see SetLossy.
	Lossy bool
	// Batch is where the agent writes the outputs of each input; nil gives
	// it one of its own. Agents fed by one goroutine, one input at a time
	// (the simulator's), may share one: an input's outputs are then valid
	// only until any of them takes the next input, and the few lines they
	// are written to stay in the cache across a crowd of agents.
	Batch *Batch
}

// Batch holds the outputs of one input and what they point to. Its zero
// value is ready to use.
type Batch struct {
	out     []Output
	events  [batchEvents]history.Event // what the outputs' Events point to
	reqs    [batchRequests]Request     // what the outputs' Requests point to
	nev     int
	nreq    int
	wr      WriteOp // what a Write output points to
	failure Failure // what a Failed output points to
}

// phase is where an agent is in its loop.
type phase uint8

const (
	phIdle      phase = iota // thinking, or waiting out a denial
	phAcquiring              // an acquire is in flight
	phHolding                // holds a lease: next step is the validity check
	phStalled                // passed its check; the write is due when the stall ends
)

// Agent is one agent. Its random streams are its own, seeded from the
// scenario's seed and its index, so its k-th stall, think time, pick and
// network fate are the same in both modes and on every driver.
//
// An Agent is not safe for concurrent use: a driver feeds it one input at a
// time. The Outputs an input returns are valid until the next input (to any
// agent that shares its Batch).
type Agent struct {
	sc         *spec.Scenario
	mode       history.Mode
	naive      bool // the mode's contender checks its own deadline and writes straight
	idx        int
	name       string
	scripted   bool
	resources  []string
	agentIndex func(string) int
	drift      Drift
	clock      Clock
	client     *leasefence.Client
	lossy      bool

	rngThink, rngStall, rngNet, rngPick *rand.Rand

	gen      uint32 // invalidates step and retry timers
	renewGen uint32 // invalidates renewal timers
	phase    phase
	denied   bool
	writing  bool // a Write is out, its Committed not yet in
	resource int  // held or wanted, or -1
	picks    int

	acq        leasefence.AcquireRequest
	acqSent    time.Duration // true instant the current acquire was first sent
	retries    int
	lease      *leasefence.Lease
	epoch      int32              // the coordinator incarnation that granted lease
	until      time.Duration      // the true instant until which it believes in lease
	naiveUntil leasefence.Instant // a naive contender's expiresAt, on the agent's clock (believe)
	renew      leasefence.RenewRequest
	renewSent  time.Duration
	renewing   bool
	renewLater bool // a renewal came due during a stall
	lost       bool // learned the lease is gone while stalled
	writes     int
	checked    bool          // the last validity check passed
	stallUntil time.Duration // a live stall

	b *Batch // the outputs of the input being taken
}

// stream mixes a scenario seed with a purpose: every agent draws each
// purpose from its own stream.
func stream(seed, purpose uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^purpose*0x9e3779b97f4a7c15, uint64(i)+1))
}

// New makes an agent. It fails only if the library refuses its client.
func New(cfg Config) (*Agent, error) {
	a := new(Agent)
	if err := a.Init(cfg); err != nil {
		return nil, err
	}
	return a, nil
}

// Room for the longest batch of outputs an input returns (at most 4
// outputs, 3 events and 2 requests), so that a running agent allocates
// none; a longer batch would still be right, only allocate.
const (
	maxBatch      = 8
	batchEvents   = 3
	batchRequests = 2
)

// Init makes an agent in place, as New does: for a driver that keeps its
// agents in one slice, a crowd's agents side by side in memory.
func (a *Agent) Init(cfg Config) error {
	sc := cfg.Scenario
	i := cfg.Index
	*a = Agent{
		sc: sc, mode: cfg.Mode, naive: naive(cfg), idx: i, name: spec.AgentName(i), scripted: cfg.Scripted,
		resources: cfg.Resources, agentIndex: cfg.AgentIndex, lossy: cfg.Lossy, resource: -1, b: cfg.Batch,
	}
	if a.b == nil {
		a.b = new(Batch)
	}
	if a.b.out == nil {
		a.b.out = make([]Output, 0, maxBatch)
	}
	a.rngThink, a.rngStall, a.rngNet, a.rngPick = stream(sc.Seed, 1, i), stream(sc.Seed, 2, i), stream(sc.Seed, 3, i), stream(sc.Seed, 4, i)
	clockRNG := stream(sc.Seed, 5, i)
	ppm := sc.Clocks.DriftPPM.Min + clockRNG.Float64()*(sc.Clocks.DriftPPM.Max-sc.Clocks.DriftPPM.Min)
	offset := sc.Clocks.Offset.Min + time.Duration(clockRNG.Float64()*float64(sc.Clocks.Offset.Max-sc.Clocks.Offset.Min))
	if ac, ok := sc.Clocks.Agent[a.name]; ok {
		ppm, offset = ac.DriftPPM, ac.Offset
	}
	a.drift = Drift{Rate: 1 + ppm/1e6, Offset: offset}
	a.clock = cfg.Clock(a.name, a.drift)
	var key [32]byte
	for j := range key {
		key[j] = byte(clockRNG.Uint32())
	}
	c, err := leasefence.NewClient(leasefence.ClientOptions{
		Clock: a.clock, Holder: a.name, ClockSkew: sc.ClockSkew,
		Entropy: rand.NewChaCha8(key), RequestRecord: 16,
	})
	if err != nil {
		return fmt.Errorf("agent: client for %s: %w", a.name, err)
	}
	a.client = c
	return nil
}

// PendingAcquire is the acquire in flight (what a Send of an acquire
// sends).
func (a *Agent) PendingAcquire() leasefence.AcquireRequest { return a.acq }

// PendingRenewal is the renewal last sent (what a Send of a renewal sends).
func (a *Agent) PendingRenewal() leasefence.RenewRequest { return a.renew }

// Name is the agent's name, Index its index.
func (a *Agent) Name() string { return a.name }

// Index is the agent's index in the header's agents.
func (a *Agent) Index() int { return a.idx }

// Drift is the drift drawn for the agent's clock.
func (a *Agent) Drift() Drift { return a.drift }

// Clock is the agent's clock.
func (a *Agent) Clock() Clock { return a.clock }

// Scripted reports whether the agent follows the script.
func (a *Agent) Scripted() bool { return a.scripted }

// Resource is the resource the agent holds or wants, or -1.
func (a *Agent) Resource() int { return a.resource }

// Lease is the lease the agent believes it holds, or nil, and the
// coordinator incarnation that granted it.
func (a *Agent) Lease() (*leasefence.Lease, int32) { return a.lease, a.epoch }

// Acquiring reports whether an acquire is in flight.
func (a *Agent) Acquiring() bool { return a.phase == phAcquiring }

// Acting reports whether the agent acts under a lease: it holds one, or
// stalls under it.
func (a *Agent) Acting() bool { return a.phase == phHolding || a.phase == phStalled }

// Stalled reports whether the agent is stalled at now: between its check
// and its write, or in a live stall.
func (a *Agent) Stalled(now time.Duration) bool { return a.phase == phStalled || now < a.stallUntil }

// Denied reports whether the agent waits out a denial.
func (a *Agent) Denied() bool { return a.denied }

// Belief is the true instant until which the agent believes in its lease
// (meaningful while Lease is not nil).
func (a *Agent) Belief() time.Duration { return a.until }

// Event is an event of kind about the agent and the lease it holds, if
// any, with its generation: for a driver to record what it did for the
// agent (a write landing, a refusal).
func (a *Agent) Event(kind history.Kind) history.Event { return a.leaseEvent(kind, 0) }

// begin starts a batch of outputs.
func (a *Agent) begin() { b := a.b; b.out, b.nev, b.nreq = b.out[:0], 0, 0 }

func (a *Agent) emit(e history.Event) {
	b := a.b
	var p *history.Event
	if b.nev < len(b.events) {
		p = &b.events[b.nev]
		b.nev++
	} else {
		p = new(history.Event)
	}
	*p = e
	b.out = append(b.out, Output{Kind: Emit, Event: p})
}

func (a *Agent) arm(t Timer, at time.Duration, gen uint32) {
	a.b.out = append(a.b.out, Output{Kind: Arm, Timer: t, At: at, Gen: gen})
}

func (a *Agent) send(r Request) {
	b := a.b
	var p *Request
	if b.nreq < len(b.reqs) {
		p = &b.reqs[b.nreq]
		b.nreq++
	} else {
		p = new(Request)
	}
	*p = r
	b.out = append(b.out, Output{Kind: Send, Request: p})
}

func (a *Agent) failed(op string, err error) {
	a.b.failure = Failure{Op: op, Err: err}
	a.b.out = append(a.b.out, Output{Kind: Failed, Failure: &a.b.failure})
}

// leaseEvent is an event of kind about the agent and the lease it holds, if
// any, with its generation.
func (a *Agent) leaseEvent(kind history.Kind, d time.Duration) history.Event {
	e := history.Event{Kind: kind, Agent: a.idx, Resource: a.resource, Other: -1, Dur: d}
	if a.lease != nil {
		e.Fence, e.Incarnation = a.lease.Token.Fence, a.epoch
	}
	return e
}

// naive reports whether cfg's agent writes by the naive discipline.
func naive(cfg Config) bool {
	d := cfg.Discipline
	if d == "" {
		h := history.Header{}
		d = h.Contender(cfg.Mode).Discipline
	}
	return d == history.DisciplineNaive
}
