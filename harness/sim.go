package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Sim is one simulation of one mode: agents, network, coordinator and
// resources as state machines driven by one virtual clock. It runs the real
// leasefence Coordinator, Clients and FenceGates; every participant reads
// time through its own leasefence.Clock, derived from the virtual clock by
// its offset and drift, so the library sees what a real process with that
// clock would see.
//
// A Sim is not safe for concurrent use; Live wraps it for that.
type Sim struct {
	sc   Scenario
	mode Mode

	now    time.Duration
	queue  timerQueue
	tseq   uint64
	events uint64
	digest digest
	subs   []Subscriber
	done   bool

	agents    []agent
	resources []resource
	msgs      []message
	freeMsgs  []int32

	coord      *leasefence.Coordinator
	coordClock leasefence.Clock
	coordRate  float64 // 1 + drift
	epoch      int32   // coordinator incarnation, from 0

	dropRequests float64
	dropReplies  float64
	push         bool
	pushRNG      *rand.Rand

	agentByName    map[string]int
	resourceByName map[string]int

	hist     history
	live     Totals
	refusals []RefusalView // the newest refusals, for snapshots
}

// resource is one shared resource: its gate (fenced mode) and what landed.
type resource struct {
	name      string
	gate      *leasefence.FenceGate
	maxLanded leasefence.Fence
	landedBy  int32 // agent of the highest-fence write landed, -1 if none
	admitted  int
	refused   int
	current   int32 // the latest lease record minted for it, -1 if none
}

// message is a request in flight, then its reply. Slots are reused.
type message struct {
	kind       leasefence.RequestKind
	agent      int32
	acquire    leasefence.AcquireRequest
	renew      leasefence.RenewRequest
	release    leasefence.Token
	acqOut     leasefence.AcquireOutcome
	renOut     leasefence.RenewOutcome
	relOut     leasefence.ReleaseOutcome
	replyDelay time.Duration
	rec        int32 // acquire: the lease record of the grant, -1 if none
}

// NewSim builds the simulation of sc in mode, with subscribers receiving
// every event. It fails if sc is invalid.
func NewSim(sc Scenario, mode Mode, subs ...Subscriber) (*Sim, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if mode != Fenced && mode != Naive {
		return nil, fmt.Errorf("%w: mode must be fenced or naive, got %q", ErrInvalidScenario, mode)
	}
	s := &Sim{
		sc:           sc,
		mode:         mode,
		subs:         subs,
		digest:       newDigest(),
		dropRequests: sc.Network.DropRequests,
		dropReplies:  sc.Network.DropReplies,
		push:         sc.Push.Enabled,
		pushRNG:      rand.New(rand.NewPCG(sc.Seed, 0x9e3779b97f4a7c15)),
		coordRate:    1 + sc.Clocks.CoordinatorDriftPPM/1e6,
	}
	s.coordClock = leasefence.NewClock("coordinator", func() time.Duration {
		return time.Duration(float64(s.now) * s.coordRate)
	})
	if err := s.startCoordinator(0); err != nil {
		return nil, err
	}
	s.resources = make([]resource, sc.Resources)
	s.resourceByName = make(map[string]int, sc.Resources)
	for i := range s.resources {
		r := &s.resources[i]
		r.name = ResourceName(i)
		s.resourceByName[r.name] = i
		r.landedBy = -1
		r.current = -1
		if mode == Fenced {
			// The checker matches every refusal of a run to a refused
			// write, so a run's gate retains its whole log: a run is
			// finite, and the log grows only as refusals happen.
			r.gate = leasefence.NewFenceGate(r.name, leasefence.WithRejectionLog(math.MaxInt))
		}
	}
	scripted := make(map[int]bool)
	for _, a := range sc.Script {
		i, _ := sc.agentIndex(a.Agent)
		scripted[i] = true
	}
	s.agents = make([]agent, sc.Agents)
	s.agentByName = make(map[string]int, sc.Agents)
	for i := range s.agents {
		s.agentByName[AgentName(i)] = i
		if err := s.initAgent(i, scripted[i]); err != nil {
			return nil, err
		}
	}
	s.schedule(sc.Duration, timer{kind: 0}) // the end
	for i, a := range sc.Script {
		s.schedule(a.At, timer{kind: tScript, arg: int32(i)})
	}
	for i, r := range sc.Restarts {
		s.schedule(r.At, timer{kind: tRestart, arg: int32(i)})
	}
	for i, p := range sc.Partitions {
		ai, _ := sc.agentIndex(p.Agent)
		s.schedule(p.From, timer{kind: tPartitionBegin, agent: int32(ai), arg: int32(i)})
		s.schedule(p.To, timer{kind: tPartitionEnd, agent: int32(ai), arg: int32(i)})
	}
	for i, iv := range sc.Interventions {
		s.schedule(iv.At, timer{kind: tIntervention, arg: int32(i)})
	}
	for i := range s.agents {
		if !s.agents[i].scripted {
			a := &s.agents[i]
			s.scheduleAgent(a, a.think.sample(a.rngThink))
		}
	}
	return s, nil
}

func (s *Sim) startCoordinator(start leasefence.Fence) error {
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: s.coordClock, TTL: s.sc.TTL, StartFence: start,
	})
	if err != nil {
		return fmt.Errorf("harness: coordinator: %w", err)
	}
	s.coord = c
	return nil
}

// Mode returns the simulation's mode.
func (s *Sim) Mode() Mode { return s.mode }

// Now returns the current virtual (true) time.
func (s *Sim) Now() time.Duration { return s.now }

// Done reports whether the run reached the scenario's duration.
func (s *Sim) Done() bool { return s.done }

// Events returns the number of events reported so far.
func (s *Sim) Events() uint64 { return s.events }

// NextAt returns the virtual instant of the next timer, and false when the
// run is done.
func (s *Sim) NextAt() (time.Duration, bool) {
	if s.done || len(s.queue) == 0 {
		return 0, false
	}
	return s.queue.peek().at, true
}

// Step fires the next timer. It returns false once the run is done.
func (s *Sim) Step() bool {
	if s.done || len(s.queue) == 0 {
		s.done = true
		return false
	}
	t := s.queue.pop()
	s.now = t.at
	s.fire(t)
	return !s.done
}

// RunUntil fires every timer due at or before v (or until the run ends) and
// leaves the clock at v.
func (s *Sim) RunUntil(v time.Duration) {
	for !s.done && len(s.queue) > 0 && s.queue.peek().at <= v {
		s.Step()
	}
	if !s.done && v > s.now {
		s.now = min(v, s.sc.Duration)
	}
}

// Run runs the simulation to its end, checking ctx between batches of
// events, and returns the checker's report.
func (s *Sim) Run(ctx context.Context) (*Report, error) {
	for n := 0; s.Step(); n++ {
		if n&0xfff == 0 && ctx.Err() != nil {
			return s.Report(), ctx.Err()
		}
	}
	return s.Report(), nil
}

func (s *Sim) schedule(at time.Duration, t timer) {
	s.tseq++
	t.at = at
	t.seq = s.tseq
	s.queue.push(t)
}

func (s *Sim) fire(t timer) {
	switch t.kind {
	case 0:
		s.done = true
	case tAgentStep:
		a := &s.agents[t.agent]
		if t.gen == a.gen {
			s.agentStep(a)
		}
	case tStallEnd:
		s.stallEnd(&s.agents[t.agent], t.gen)
	case tRetry:
		a := &s.agents[t.agent]
		if t.gen == a.gen {
			s.acquireTimeout(a)
		}
	case tRenew:
		a := &s.agents[t.agent]
		if t.gen == a.gen {
			s.renewDue(a)
		}
	case tDeliverRequest:
		s.deliverRequest(t.arg)
	case tDeliverReply:
		s.deliverReply(t.arg)
	case tExpiry:
		s.expiryDue(t.arg, leasefence.Fence(t.fence), t.gen)
	case tPush:
		s.pushArrives(t.arg, int(t.agent), leasefence.Fence(t.fence))
	case tRestart:
		s.restart(s.sc.Restarts[t.arg].Persist)
	case tPartitionBegin:
		s.agents[t.agent].partitions++
		s.emit(Event{Kind: PartitionBegan, Agent: int(t.agent), Resource: -1, Other: -1})
	case tPartitionEnd:
		s.agents[t.agent].partitions--
		s.emit(Event{Kind: PartitionEnded, Agent: int(t.agent), Resource: -1, Other: -1})
	case tScript:
		s.script(s.sc.Script[t.arg])
	case tIntervention:
		s.apply(s.sc.Interventions[t.arg])
	}
}

// emit stamps, hashes and publishes an event.
func (s *Sim) emit(e Event) {
	s.events++
	e.Seq = s.events
	e.At = s.now
	e.Mode = s.mode
	s.digest.add(&e)
	for _, sub := range s.subs {
		sub.Event(e)
	}
}

// Digest returns the hash of the event log so far, as 16 hex digits.
func (s *Sim) Digest() string { return s.digest.String() }

// --- the network ---

func (s *Sim) newMessage(kind leasefence.RequestKind, agent int32) int32 {
	var i int32
	if n := len(s.freeMsgs); n > 0 {
		i = s.freeMsgs[n-1]
		s.freeMsgs = s.freeMsgs[:n-1]
	} else {
		s.msgs = append(s.msgs, message{})
		i = int32(len(s.msgs) - 1)
	}
	s.msgs[i] = message{kind: kind, agent: agent, rec: -1}
	return i
}

func (s *Sim) freeMessage(i int32) {
	s.msgs[i] = message{}
	s.freeMsgs = append(s.freeMsgs, i)
}

// send puts message m on the wire from its agent to the coordinator,
// drawing its fate from the agent's network stream: the same draws in both
// modes for the agent's k-th message.
func (s *Sim) send(m int32, reqDelay, repDelay *time.Duration) {
	msg := &s.msgs[m]
	a := &s.agents[msg.agent]
	r := a.rngNet
	d := s.sc.Network.RequestDelay.sample(r)
	if reqDelay != nil {
		d = *reqDelay
	}
	msg.replyDelay = s.sc.Network.ReplyDelay.sample(r)
	if repDelay != nil {
		msg.replyDelay = *repDelay
	}
	lost := r.Float64() < s.dropRequests
	dup := r.Float64() < s.sc.Network.Duplicate
	dupDelay := s.sc.Network.RequestDelay.sample(r)
	s.emit(Event{Kind: RequestSent, Agent: int(msg.agent), Resource: a.resource, Other: -1,
		Fence: msg.token().Fence, Request: msg.kind, RequestID: msg.id(), Dur: d})
	if lost || a.partitions > 0 {
		s.lose(m, RequestDropped)
		return
	}
	s.schedule(s.now+d, timer{kind: tDeliverRequest, arg: m})
	if dup {
		c := s.newMessage(msg.kind, msg.agent)
		s.msgs[c] = *msg
		s.emit(Event{Kind: RequestDuplicated, Agent: int(msg.agent), Resource: a.resource, Other: -1,
			Request: msg.kind, RequestID: msg.id(), Dur: d + dupDelay})
		s.schedule(s.now+d+dupDelay, timer{kind: tDeliverRequest, arg: c})
	}
}

// lose drops message m on the wire, as kind (RequestDropped or ReplyDropped).
func (s *Sim) lose(m int32, kind Kind) {
	msg := &s.msgs[m]
	s.live.MessagesLost++
	s.emit(Event{Kind: kind, Agent: int(msg.agent), Resource: s.agents[msg.agent].resource, Other: -1,
		Request: msg.kind, RequestID: msg.id()})
	s.freeMessage(m)
}

func (m *message) id() string {
	switch m.kind {
	case leasefence.KindAcquire:
		return m.acquire.RequestID
	case leasefence.KindRenew:
		return m.renew.RequestID
	}
	return ""
}

func (m *message) token() leasefence.Token {
	switch m.kind {
	case leasefence.KindRenew:
		return m.renew.Token
	case KindRelease:
		return m.release
	}
	return leasefence.Token{}
}

// deliverRequest is the coordinator processing a message.
func (s *Sim) deliverRequest(m int32) {
	msg := &s.msgs[m]
	a := &s.agents[msg.agent]
	if a.partitions > 0 {
		s.lose(m, RequestDropped)
		return
	}
	var err error
	switch msg.kind {
	case leasefence.KindAcquire:
		msg.acqOut, err = s.coord.Acquire(msg.acquire)
		if err == nil {
			s.coordinatorAcquired(msg)
		}
	case leasefence.KindRenew:
		msg.renOut, err = s.coord.Renew(msg.renew)
		if err == nil && msg.renOut.OK {
			s.coordinatorExtended(msg.renOut.Grant)
		}
	case KindRelease:
		msg.relOut, err = s.coord.Release(msg.release)
		switch {
		case err != nil:
		case msg.relOut.OK:
			s.coordinatorReleased(msg.release)
		default:
			s.emit(Event{Kind: ReleaseRefused, Agent: int(msg.agent), Resource: s.resourceOf(msg.release.Resource),
				Fence: msg.release.Fence, Other: -1, Reason: msg.relOut.Reason})
		}
	}
	if err != nil {
		// The coordinator's clock is the sim's and never steps back, and
		// every request is built by a Client: an error is a harness bug.
		panic(fmt.Sprintf("harness: coordinator refused a well-formed request: %v", err))
	}
	lost := a.rngNet.Float64() < s.dropReplies
	if lost || a.partitions > 0 {
		s.lose(m, ReplyDropped)
		return
	}
	s.schedule(s.now+msg.replyDelay, timer{kind: tDeliverReply, arg: m})
}

// coordinatorAcquired records a fence the coordinator minted (not a replay)
// and schedules its expiry and push.
func (s *Sim) coordinatorAcquired(msg *message) {
	out := msg.acqOut
	if !out.OK {
		return
	}
	g := out.Grant
	ri := s.resourceOf(g.Token.Resource)
	res := &s.resources[ri]
	if res.current >= 0 {
		if rec := &s.hist.leases[res.current]; rec.epoch == s.epoch && rec.fence == g.Token.Fence {
			msg.rec = res.current // the same grant again: a retry answered from the replay cache
			return
		}
	}
	exp := s.coordTrue(g.CoordinatorExpiresAt)
	idx := s.hist.mint(leaseRec{
		agent: msg.agent, resource: int32(ri), fence: g.Token.Fence, epoch: s.epoch,
		granted: s.now, coordEnd: exp, start: -1, beliefEnd: -1, actEnd: -1,
	})
	res.current = idx
	msg.rec = idx
	s.schedule(exp, timer{kind: tExpiry, arg: int32(ri), fence: uint64(g.Token.Fence), gen: uint32(s.epoch)})
	if s.push {
		r := s.pushRNG
		d := s.sc.Push.Delay.sample(r)
		if r.Float64() < s.sc.Push.Drop {
			s.emit(Event{Kind: PushDropped, Agent: int(msg.agent), Resource: ri, Fence: g.Token.Fence, Other: -1})
		} else {
			s.schedule(s.now+d, timer{kind: tPush, arg: int32(ri), agent: msg.agent, fence: uint64(g.Token.Fence)})
		}
	}
}

func (s *Sim) coordinatorExtended(g leasefence.Grant) {
	ri := s.resourceOf(g.Token.Resource)
	res := &s.resources[ri]
	rec := &s.hist.leases[res.current]
	rec.coordEnd = s.coordTrue(g.CoordinatorExpiresAt)
	s.schedule(rec.coordEnd, timer{kind: tExpiry, arg: int32(ri), fence: uint64(g.Token.Fence), gen: uint32(s.epoch)})
}

func (s *Sim) coordinatorReleased(t leasefence.Token) {
	ri := s.resourceOf(t.Resource)
	rec := &s.hist.leases[s.resources[ri].current]
	rec.coordEnd = s.now
	rec.released = true
	s.emit(Event{Kind: Released, Agent: int(rec.agent), Resource: ri, Fence: t.Fence, Other: -1})
}

// expiryDue fires at a lease's coordinator expiry; it reports the expiry if
// the lease was neither renewed past it nor released nor forgotten.
func (s *Sim) expiryDue(ri int32, f leasefence.Fence, epoch uint32) {
	res := &s.resources[ri]
	if res.current < 0 || int32(epoch) != s.epoch {
		return
	}
	rec := &s.hist.leases[res.current]
	if rec.fence != f || rec.released || rec.coordEnd != s.now || rec.expired {
		return
	}
	rec.expired = true
	s.live.Expiries++
	s.emit(Event{Kind: Expired, Agent: int(rec.agent), Resource: int(ri), Fence: f, Other: -1, Deadline: rec.coordEnd})
	a := &s.agents[rec.agent]
	if a.rec == res.current && a.acting() {
		s.setState(a, a.displayState(s))
	}
}

// pushArrives is the coordinator's Admit reaching the gate.
func (s *Sim) pushArrives(ri int32, holder int, f leasefence.Fence) {
	res := &s.resources[ri]
	if res.gate == nil {
		return // naive resources have no gate to push to
	}
	t := leasefence.Token{Resource: res.name, Holder: s.agents[holder].name, Fence: f}
	err := res.gate.Admit(t)
	floor := res.gate.Floor()
	e := Event{Kind: AdmitPushed, Agent: holder, Resource: int(ri), Fence: f, Other: s.agentIndexOf(floor.Holder), OtherFence: floor.Fence}
	if err != nil {
		e.Reason = "below-floor"
	}
	s.hist.pushes++
	s.emit(e)
}

// restart replaces the coordinator. Without persistence it resumes at fence
// zero and forgets every lease.
func (s *Sim) restart(persist bool) {
	start := leasefence.Fence(0)
	if persist {
		start = s.coord.IssuedFence()
	}
	if err := s.startCoordinator(start); err != nil {
		panic(err) // options were valid at the first start
	}
	s.epoch++
	reason := leasefence.Reason("lost")
	if persist {
		reason = "persisted"
	}
	for i := range s.resources {
		res := &s.resources[i]
		if res.current >= 0 {
			s.hist.leases[res.current].forgot = true
			if a := &s.agents[s.hist.leases[res.current].agent]; a.rec == res.current && a.acting() {
				s.setState(a, a.displayState(s))
			}
		}
		res.current = -1
	}
	s.emit(Event{Kind: CoordinatorRestarted, Agent: -1, Resource: -1, Other: -1, Fence: start, Reason: reason})
}

// --- clocks ---

// coordTrue maps a coordinator reading to the true instant it is reached.
func (s *Sim) coordTrue(i leasefence.Instant) time.Duration {
	return inverse(i.Offset(), 0, s.coordRate, func(v time.Duration) time.Duration {
		return time.Duration(float64(v) * s.coordRate)
	})
}

// inverse returns the first true instant v at which forward(v) >= r, for a
// clock forward(v) = offset + v*rate that never decreases.
func inverse(r, offset time.Duration, rate float64, forward func(time.Duration) time.Duration) time.Duration {
	v := time.Duration(math.Floor(float64(r-offset) / rate))
	for forward(v) < r {
		v++
	}
	for forward(v-1) >= r {
		v--
	}
	return v
}

func (s *Sim) agentIndexOf(name string) int {
	if i, ok := s.agentByName[name]; ok {
		return i
	}
	return -1
}

func (s *Sim) resourceOf(name string) int { return s.resourceByName[name] }

// --- the digest ---

// digest folds each event into a 64-bit hash a word at a time (multiply,
// xor-shift): cheap on the hot path, and the same on every platform.
type digest struct{ h uint64 }

func newDigest() digest { return digest{h: 0xcbf29ce484222325} }

func (d *digest) u64(v uint64) {
	h := (d.h ^ v) * 0x100000001b3
	d.h = h ^ h>>29
}

// str folds a string and its length.
func (d *digest) str(v string) {
	d.u64(uint64(len(v)))
	d.chars(v)
}

// chars folds a string's bytes, eight at a time; the caller folds its
// length.
func (d *digest) chars(v string) {
	if v == "" {
		return
	}
	for len(v) >= 8 {
		d.u64(binary.LittleEndian.Uint64([]byte(v[:8])))
		v = v[8:]
	}
	var tail uint64
	for i := 0; i < len(v); i++ {
		tail |= uint64(v[i]) << (8 * i)
	}
	d.u64(tail)
}

func (d *digest) add(e *Event) {
	// Indices are below 2^20 (MaxAgents, MaxResources), so kind, agent,
	// resource and the other party pack into two words.
	d.u64(uint64(e.At))
	d.u64(uint64(e.Kind) | uint64(uint32(e.Agent))<<8 | uint64(uint32(e.Resource))<<32)
	d.u64(uint64(uint32(e.Other)) | uint64(len(e.Request))<<32 | uint64(len(e.Reason))<<48)
	d.u64(uint64(e.Fence))
	d.u64(uint64(e.OtherFence))
	d.u64(uint64(e.Dur))
	d.u64(uint64(e.Deadline))
	d.chars(string(e.Request))
	d.chars(string(e.Reason))
	d.str(e.RequestID)
	if iv := e.Intervention; iv != nil {
		d.str(string(iv.Kind))
		d.str(iv.Agent)
		d.u64(uint64(iv.Duration))
		d.u64(math.Float64bits(iv.Value))
	}
}

func (d digest) String() string { return fmt.Sprintf("%016x", d.h) }
