package harness

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
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
	sc    spec.Scenario
	mode  history.Mode
	naive bool // the mode's contender writes straight to the resource, with no gate

	now    time.Duration
	queue  timerQueue
	tseq   uint64
	events uint64
	subs   []history.Subscriber
	done   bool

	// header and fold: the simulation's report is the checker's verdict
	// on the events it emits, folded beside the engine in their order.
	header history.Header
	fold   *folder

	agents    []actor
	batch     agent.Batch // every agent's outputs: one input at a time
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
	pushes       *agent.Pushes

	// agentNames and resourceNames are spec.AgentName and
	// spec.ResourceName of each index, for nameIndex.
	agentNames    []string
	resourceNames []string
}

// resource is one shared resource: its gate (fenced mode), and the
// coordinator's current lease on it.
type resource struct {
	name    string
	gate    *leasefence.FenceGate
	current grant
}

// grant is the coordinator's side of the newest lease it minted for a
// resource: what the engine needs to schedule its expiry and tell a retry
// answered from the coordinator's replay cache from a fresh grant.
type grant struct {
	live     bool // minted by the current incarnation
	agent    int32
	fence    leasefence.Fence
	epoch    int32
	coordEnd time.Duration
	released bool
	expired  bool
}

// message is a request in flight, then its reply. Slots are reused.
type message struct {
	kind       history.Request
	agent      int32
	acquire    leasefence.AcquireRequest
	renew      leasefence.RenewRequest
	release    leasefence.Token
	acqOut     leasefence.AcquireOutcome
	renOut     leasefence.RenewOutcome
	relOut     leasefence.ReleaseOutcome
	replyDelay time.Duration
	// epoch is the coordinator incarnation of the lease the message
	// concerns: the sender's lease for a renewal or release, the grant for
	// an acquire.
	epoch int32
}

// NewSim builds the simulation of sc in mode, with subscribers receiving
// every event. It fails if sc is invalid.
func NewSim(sc spec.Scenario, mode history.Mode, subs ...history.Subscriber) (*Sim, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := simulator.CanPlay(sc); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	if c, ok := registry.Lookup(registry.Contenders, string(mode)); !ok || c.RunsOnBackend(registry.Sim) != nil {
		return nil, fmt.Errorf("%w: mode must be a contender the simulator runs (%s), got %q", spec.ErrInvalidScenario,
			strings.Join(simContenders(), ", "), mode)
	}
	s := &Sim{
		sc:           sc,
		mode:         mode,
		subs:         subs,
		header:       registry.Header(sc, []history.Mode{mode}),
		dropRequests: sc.Network.DropRequests,
		dropReplies:  sc.Network.DropReplies,
		push:         sc.Push.Enabled,
		pushes:       agent.NewPushes(&sc),
		coordRate:    1 + sc.Clocks.CoordinatorDriftPPM/1e6,
	}
	s.coordClock = leasefence.NewClock("coordinator", func() time.Duration {
		return time.Duration(float64(s.now) * s.coordRate)
	})
	s.naive = !s.header.Fenced(mode)
	s.fold = newFolder(history.NewChecker(&s.header, mode))
	if err := s.startCoordinator(0); err != nil {
		return nil, err
	}
	s.resources = make([]resource, sc.Resources)
	s.resourceNames = make([]string, sc.Resources)
	for i := range s.resources {
		r := &s.resources[i]
		r.name = spec.ResourceName(i)
		s.resourceNames[i] = r.name
		if !s.naive {
			// The history records every refusal (commit_refused, with
			// the floor the refusal names), and nothing reads the gate's
			// own log: it retains one refusal, so that a long run's
			// memory does not grow with its refusals (up to
			// DefaultRejectionLog a gate). Its count, and each refusal's
			// Seq, are the same whatever it retains.
			r.gate = leasefence.NewFenceGate(r.name, leasefence.WithRejectionLog(1))
		}
	}
	scripted := make(map[int]bool)
	for _, a := range sc.Script {
		i, _ := sc.AgentIndex(a.Agent)
		scripted[i] = true
	}
	s.agents = make([]actor, sc.Agents)
	s.agentNames = make([]string, sc.Agents)
	for i := range s.agents {
		s.agentNames[i] = spec.AgentName(i)
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
		ai, _ := sc.AgentIndex(p.Agent)
		s.schedule(p.From, timer{kind: tPartitionBegin, agent: int32(ai), arg: int32(i)})
		s.schedule(p.To, timer{kind: tPartitionEnd, agent: int32(ai), arg: int32(i)})
	}
	for i, iv := range sc.Interventions {
		s.schedule(iv.At, timer{kind: tIntervention, arg: int32(i)})
	}
	for i := range s.agents {
		a := &s.agents[i]
		s.drive(a, a.ag.Start(0))
	}
	return s, nil
}

func (s *Sim) startCoordinator(start leasefence.Fence) error {
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: s.coordClock, TTL: s.sc.TTL, StartFence: start, LockDelay: s.sc.LockDelay,
	})
	if err != nil {
		return fmt.Errorf("harness: coordinator: %w", err)
	}
	s.coord = c
	return nil
}

// Mode returns the simulation's mode.
func (s *Sim) Mode() history.Mode { return s.mode }

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
func (s *Sim) Run(ctx context.Context) (*history.Report, error) {
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
		s.fireAgent(t, agent.TimerStep)
	case tStallEnd:
		s.fireAgent(t, agent.TimerStallEnd)
	case tRetry:
		s.fireAgent(t, agent.TimerRetry)
	case tRenew:
		s.fireAgent(t, agent.TimerRenew)
	case tDeliverRequest:
		s.deliverRequest(t.arg)
	case tDeliverReply:
		s.deliverReply(t.arg)
	case tExpiry:
		s.expiryDue(t.arg, leasefence.Fence(t.fence), t.gen)
	case tPush:
		s.pushArrives(t.arg, int(t.agent), leasefence.Fence(t.fence), int32(t.gen))
	case tRestart:
		s.restart(s.sc.Restarts[t.arg].Persist)
	case tPartitionBegin:
		s.agents[t.agent].partitions++
		s.emit(s.partition(t))
	case tPartitionEnd:
		s.agents[t.agent].partitions--
		s.emit(s.partition(t).Ended())
	case tScript:
		s.script(s.sc.Script[t.arg])
	case tIntervention:
		s.apply(s.sc.Interventions[t.arg])
	}
}

// fireAgent hands an agent the timer it armed.
func (s *Sim) fireAgent(t timer, at agent.Timer) {
	a := &s.agents[t.agent]
	s.drive(a, a.ag.Fire(s.now, at, t.gen))
}

// emit stamps an event, hands it to the checker's fold and publishes it.
func (s *Sim) emit(e history.Event) { s.emitOwned(&e) }

// emitOwned is emit of an event the caller lets it stamp in place (an
// agent's output): one copy of an event fewer per event of a crowd.
func (s *Sim) emitOwned(e *history.Event) {
	s.events++
	e.Seq = s.events
	e.At = s.now
	e.Mode = s.mode
	s.fold.add(e)
	for _, sub := range s.subs {
		sub.Event(*e)
	}
}

// Digest returns the hash of the history so far, as 16 hex digits.
func (s *Sim) Digest() string { return s.fold.checked().Digest() }

// Header returns the history header of this simulation's run.
func (s *Sim) Header() history.Header { return s.header }

// Report is the checker's verdict on the history emitted so far.
func (s *Sim) Report() *history.Report { return s.fold.checked().Report() }

// libraryError ends the run on an error the library should never have
// returned: it is recorded in the history, and the checker reports it as a
// violation, so the run fails as a broken invariant would, naming its
// scenario and seed.
func (s *Sim) libraryError(agent int, op string, err error) {
	s.emit(history.Event{Kind: history.LibraryError, Agent: agent, Resource: -1, Other: -1,
		Detail: fmt.Sprintf("%s: %v", op, err)})
	s.done = true
}

// --- the network ---

func (s *Sim) newMessage(kind history.Request, agent int32) int32 {
	var i int32
	if n := len(s.freeMsgs); n > 0 {
		i = s.freeMsgs[n-1]
		s.freeMsgs = s.freeMsgs[:n-1]
	} else {
		s.msgs = append(s.msgs, message{})
		i = int32(len(s.msgs) - 1)
	}
	s.msgs[i] = message{kind: kind, agent: agent}
	return i
}

// freeMessage returns slot i to the free list. The slot keeps what it
// held until newMessage clears it for its next message.
func (s *Sim) freeMessage(i int32) {
	s.freeMsgs = append(s.freeMsgs, i)
}

// send puts the agent's request on the wire to the coordinator, its fate
// drawn by the agent from its network stream.
func (s *Sim) send(a *actor, r *agent.Request) {
	m := s.newMessage(r.Kind, int32(a.idx))
	msg := &s.msgs[m]
	switch r.Kind {
	case history.RequestAcquire:
		msg.acquire = a.ag.PendingAcquire()
	case history.RequestRenew:
		msg.renew = a.ag.PendingRenewal()
	case history.RequestRelease:
		msg.release = r.Release
	}
	msg.epoch = r.Epoch
	f := a.ag.DrawSend(r, s.dropRequests)
	msg.replyDelay = f.ReplyDelay
	resource := a.ag.Resource()
	s.emit(history.Event{Kind: history.RequestSent, Agent: a.idx, Resource: resource, Other: -1,
		Fence: msg.token().Fence, Incarnation: msg.epoch, Request: msg.kind, RequestID: msg.id(), Dur: f.RequestDelay})
	if f.Lost || a.partitions > 0 {
		s.lose(m, history.RequestDropped)
		return
	}
	s.schedule(s.now+f.RequestDelay, timer{kind: tDeliverRequest, arg: m})
	if f.Duplicated {
		c := s.newMessage(msg.kind, msg.agent)
		s.msgs[c] = *msg
		d := f.RequestDelay + f.DuplicateLag
		s.emit(history.Event{Kind: history.RequestDuplicated, Agent: a.idx, Resource: resource, Other: -1,
			Fence: msg.token().Fence, Incarnation: msg.epoch, Request: msg.kind, RequestID: msg.id(), Dur: d})
		s.schedule(s.now+d, timer{kind: tDeliverRequest, arg: c})
	}
}

// lose drops message m on the wire, as kind (RequestDropped or ReplyDropped).
func (s *Sim) lose(m int32, kind history.Kind) {
	msg := &s.msgs[m]
	s.emit(history.Event{Kind: kind, Agent: int(msg.agent), Resource: s.agents[msg.agent].ag.Resource(), Other: -1,
		Fence: msg.token().Fence, Incarnation: msg.epoch, Request: msg.kind, RequestID: msg.id()})
	s.freeMessage(m)
}

func (m *message) id() string {
	switch m.kind {
	case history.RequestAcquire:
		return m.acquire.RequestID
	case history.RequestRenew:
		return m.renew.RequestID
	}
	return ""
}

func (m *message) token() leasefence.Token {
	switch m.kind {
	case history.RequestRenew:
		return m.renew.Token
	case history.RequestRelease:
		return m.release
	}
	return leasefence.Token{}
}

// deliverReply is a reply reaching its agent.
func (s *Sim) deliverReply(m int32) {
	// The agent takes the reply before the slot is freed, and its outputs
	// are carried out after, so that what they send may reuse the slot: a
	// message is read in place, not copied (it is over 500 bytes).
	msg := &s.msgs[m]
	a := &s.agents[msg.agent]
	var out []agent.Output
	switch msg.kind {
	case history.RequestAcquire:
		out = a.ag.AcquireReplied(s.now, msg.acquire.RequestID, msg.acqOut, msg.epoch)
	case history.RequestRenew:
		out = a.ag.RenewReplied(s.now, msg.renew.RequestID, msg.renOut)
	}
	s.freeMessage(m)
	s.drive(a, out)
}

// deliverRequest is the coordinator processing a message.
func (s *Sim) deliverRequest(m int32) {
	msg := &s.msgs[m]
	a := &s.agents[msg.agent]
	if a.partitions > 0 {
		s.lose(m, history.RequestDropped)
		return
	}
	var err error
	switch msg.kind {
	case history.RequestAcquire:
		msg.acqOut, err = s.coord.Acquire(msg.acquire)
		if err == nil {
			s.coordinatorAcquired(msg)
		}
	case history.RequestRenew:
		msg.renOut, err = s.coord.Renew(msg.renew)
		if err == nil && msg.renOut.OK {
			s.coordinatorExtended(msg.renOut.Grant)
		}
	case history.RequestRelease:
		msg.relOut, err = s.coord.Release(msg.release)
		switch {
		case err != nil:
		case msg.relOut.OK:
			s.coordinatorReleased(msg.release)
		default:
			s.emit(history.Event{Kind: history.ReleaseRefused, Agent: int(msg.agent), Resource: s.resourceOf(msg.release.Resource),
				Fence: msg.release.Fence, Incarnation: msg.epoch, Other: -1, Reason: msg.relOut.Reason})
		}
	}
	if err != nil {
		// The coordinator's clock is the sim's and never steps back, and
		// every request is built by a Client: an error is a library bug.
		agent, op := int(msg.agent), "coordinator "+string(msg.kind)
		s.freeMessage(m)
		s.libraryError(agent, op, err)
		return
	}
	if a.ag.DrawReplyLost(s.dropReplies) || a.partitions > 0 {
		s.lose(m, history.ReplyDropped)
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
	msg.epoch = s.epoch
	if c := &res.current; c.live && c.fence == g.Token.Fence {
		return // the same grant again: a retry answered from the replay cache
	}
	exp := s.coordTrue(g.CoordinatorExpiresAt)
	res.current = grant{live: true, agent: msg.agent, fence: g.Token.Fence, epoch: s.epoch, coordEnd: exp}
	s.emit(history.Event{Kind: history.Granted, Agent: int(msg.agent), Resource: ri, Fence: g.Token.Fence,
		Incarnation: s.epoch, Other: -1, RequestID: g.RequestID, Deadline: exp})
	s.schedule(exp, timer{kind: tExpiry, arg: int32(ri), fence: uint64(g.Token.Fence), gen: uint32(s.epoch)})
	if s.push {
		if d, dropped := s.pushes.Draw(); dropped {
			s.emit(history.Event{Kind: history.PushDropped, Agent: int(msg.agent), Resource: ri, Fence: g.Token.Fence,
				Incarnation: s.epoch, Other: -1})
		} else {
			s.schedule(s.now+d, timer{kind: tPush, arg: int32(ri), agent: msg.agent, fence: uint64(g.Token.Fence), gen: uint32(s.epoch)})
		}
	}
}

func (s *Sim) coordinatorExtended(g leasefence.Grant) {
	ri := s.resourceOf(g.Token.Resource)
	c := &s.resources[ri].current
	c.coordEnd = s.coordTrue(g.CoordinatorExpiresAt)
	s.emit(history.Event{Kind: history.Extended, Agent: int(c.agent), Resource: ri, Fence: c.fence,
		Incarnation: c.epoch, Other: -1, Deadline: c.coordEnd})
	s.schedule(c.coordEnd, timer{kind: tExpiry, arg: int32(ri), fence: uint64(g.Token.Fence), gen: uint32(s.epoch)})
}

func (s *Sim) coordinatorReleased(t leasefence.Token) {
	ri := s.resourceOf(t.Resource)
	c := &s.resources[ri].current
	c.coordEnd = s.now
	c.released = true
	s.emit(history.Event{Kind: history.Released, Agent: int(c.agent), Resource: ri, Fence: t.Fence,
		Incarnation: c.epoch, Other: -1})
}

// expiryDue fires at a lease's coordinator expiry; it reports the expiry if
// the lease was neither renewed past it nor released nor forgotten.
func (s *Sim) expiryDue(ri int32, f leasefence.Fence, epoch uint32) {
	c := &s.resources[ri].current
	if !c.live || int32(epoch) != s.epoch {
		return
	}
	if c.fence != f || c.released || c.coordEnd != s.now || c.expired {
		return
	}
	c.expired = true
	s.emit(history.Event{Kind: history.Expired, Agent: int(c.agent), Resource: int(ri), Fence: f,
		Incarnation: c.epoch, Other: -1, Deadline: c.coordEnd})
}

// pushArrives is the coordinator's Admit reaching the gate.
func (s *Sim) pushArrives(ri int32, holder int, f leasefence.Fence, epoch int32) {
	res := &s.resources[ri]
	if res.gate == nil {
		return // naive resources have no gate to push to
	}
	t := leasefence.Token{Resource: res.name, Holder: s.agents[holder].ag.Name(), Fence: f}
	err := res.gate.Admit(t)
	floor := res.gate.Floor()
	e := history.Event{Kind: history.AdmitPushed, Agent: holder, Resource: int(ri), Fence: f, Incarnation: epoch,
		Other: s.agentIndexOf(floor.Holder), OtherFence: floor.Fence}
	if err != nil {
		e.Outcome = history.OutcomeBelowFloor
	}
	s.emit(e)
}

// partition is the fault event of the partition timer t begins or ends.
func (s *Sim) partition(t timer) history.Event {
	p := s.sc.Partitions[t.arg]
	return spec.FaultPartition.Began(int(t.agent), "", p.To-p.From)
}

// restart replaces the coordinator. Without persistence it resumes at fence
// zero and forgets every lease.
func (s *Sim) restart(persist bool) {
	s.emit(spec.RestartBegan(persist))
	start := leasefence.Fence(0)
	if persist {
		start = s.coord.IssuedFence()
	}
	if err := s.startCoordinator(start); err != nil {
		s.libraryError(-1, "restart", err)
		return
	}
	s.epoch++
	outcome := history.OutcomeCounterLost
	if persist {
		outcome = history.OutcomeCounterPersisted
	}
	s.emit(history.Event{Kind: history.CoordinatorRestarted, Agent: -1, Resource: -1, Other: -1, Fence: start,
		Incarnation: s.epoch, Outcome: outcome})
	for i := range s.resources {
		s.resources[i].current.live = false
	}
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

func (s *Sim) agentIndexOf(name string) int { return nameIndex(s.agentNames, "agent-", name) }

func (s *Sim) resourceOf(name string) int { return nameIndex(s.resourceNames, "res-", name) }

// nameIndex returns the index of name in names, each of which is prefix
// and its index plus one in decimal (spec.AgentName, spec.ResourceName), or
// -1 if it is none of them: read off the name rather than hashed, since a
// crowd looks a name up on every denial and every grant.
func nameIndex(names []string, prefix, name string) int {
	n, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 1 || i > len(names) || names[i-1] != name {
		return -1
	}
	return i - 1
}
