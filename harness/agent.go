package harness

import (
	"context"
	"errors"
	"fmt"
	"github.com/leasefence/lab/spec"
	"math/rand/v2"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// phase is where an agent is in its loop.
type phase uint8

const (
	phIdle      phase = iota // thinking, or waiting out a denial
	phAcquiring              // an acquire is in flight
	phHolding                // holds a lease: next step is the validity check
	phStalled                // passed its check; the write is due when the stall ends
)

// agent is one simulated process taking leases. Its clock reads
// offset + true*rate, and its random streams are its own, so its k-th stall,
// think time and network fate are the same in both modes.
type agent struct {
	idx      int
	name     string
	rate     float64
	offset   time.Duration
	clock    leasefence.Clock
	client   *leasefence.Client
	scripted bool

	rngThink, rngStall, rngNet, rngPick *rand.Rand
	think                               spec.Dist

	gen      uint32 // invalidates step and retry timers
	renewGen uint32 // invalidates renewal timers
	phase    phase
	state    AgentState
	denied   bool
	resource int // held or wanted, or -1
	picks    int

	acq        leasefence.AcquireRequest
	acqSent    time.Duration // true instant the current acquire was first sent
	retries    int
	lease      *leasefence.Lease
	epoch      int32              // the coordinator incarnation that granted lease
	until      time.Duration      // the true instant until which it believes in lease
	naiveUntil leasefence.Instant // naive mode: reply arrival + TTL, on the agent's clock
	renew      leasefence.RenewRequest
	renewSent  time.Duration
	renewing   bool
	renewLater bool // a renewal came due during a stall
	lost       bool // learned the lease is gone while stalled
	writes     int
	checked    bool // the last validity check passed
	partitions int
	stallUntil time.Duration // a live stall
	laneRes    int32         // the resource of the lane's current segment

	lane laneRing
}

func (s *Sim) initAgent(i int, scripted bool) error {
	sc := &s.sc
	a := &s.agents[i]
	a.idx = i
	a.name = spec.AgentName(i)
	a.scripted = scripted
	a.resource = -1
	a.think = sc.Agent.Think
	seed := sc.Seed
	stream := func(purpose uint64) *rand.Rand {
		return rand.New(rand.NewPCG(seed^purpose*0x9e3779b97f4a7c15, uint64(i)+1))
	}
	a.rngThink, a.rngStall, a.rngNet, a.rngPick = stream(1), stream(2), stream(3), stream(4)
	clockRNG := stream(5)
	ppm := sc.Clocks.DriftPPM.Min + clockRNG.Float64()*(sc.Clocks.DriftPPM.Max-sc.Clocks.DriftPPM.Min)
	a.offset = sc.Clocks.Offset.Min + time.Duration(clockRNG.Float64()*float64(sc.Clocks.Offset.Max-sc.Clocks.Offset.Min))
	if ac, ok := sc.Clocks.Agent[a.name]; ok {
		ppm, a.offset = ac.DriftPPM, ac.Offset
	}
	a.rate = 1 + ppm/1e6
	a.clock = leasefence.NewClock(leasefence.Domain(a.name), func() time.Duration { return a.reading(s.now) })
	var key [32]byte
	for j := range key {
		key[j] = byte(clockRNG.Uint32())
	}
	c, err := leasefence.NewClient(leasefence.ClientOptions{
		Clock: a.clock, Holder: a.name, ClockSkew: sc.ClockSkew,
		Entropy: rand.NewChaCha8(key), RequestRecord: 16,
	})
	if err != nil {
		return fmt.Errorf("harness: client for %s: %w", a.name, err)
	}
	a.client = c
	a.laneRes = -1
	a.lane.push(Segment{From: 0, State: AgentIdle, Resource: -1})
	return nil
}

// reading is the agent's clock at true instant v.
func (a *agent) reading(v time.Duration) time.Duration {
	return a.offset + time.Duration(float64(v)*a.rate)
}

// trueAt is the first true instant at which the agent's clock reads r.
func (a *agent) trueAt(i leasefence.Instant) time.Duration {
	return inverse(i.Offset(), a.offset, a.rate, a.reading)
}

func (a *agent) acting() bool { return a.phase == phHolding || a.phase == phStalled }

func (s *Sim) scheduleAgent(a *agent, after time.Duration) {
	s.schedule(s.now+after, timer{kind: tAgentStep, agent: int32(a.idx), gen: a.gen})
}

// agentStep runs an unscripted agent's next step.
func (s *Sim) agentStep(a *agent) {
	if s.now < a.stallUntil {
		s.schedule(a.stallUntil, timer{kind: tAgentStep, agent: int32(a.idx), gen: a.gen})
		return
	}
	switch a.phase {
	case phIdle:
		s.startAcquire(a, s.pick(a), nil, nil)
	case phHolding:
		if !s.check(a) {
			s.giveUp(a, history.OutcomeCheckFailed)
			return
		}
		d := s.sc.Agent.Stall.Sample(a.rngStall)
		a.phase = phStalled
		s.setState(a, a.displayState(s))
		s.emit(s.leaseEvent(a, history.StallBegan, d))
		s.scheduleAgent(a, d)
	case phStalled:
		s.emit(s.leaseEvent(a, history.StallEnded, 0))
		a.phase = phHolding
		s.setState(a, a.displayState(s))
		landed := s.write(a)
		switch {
		case s.done:
			return // the write hit a library error
		case !landed:
			s.giveUp(a, history.OutcomeCommitRefused)
			return
		case a.lost:
			s.giveUp(a, history.OutcomeRenewRefused)
			return
		}
		if a.renewLater {
			a.renewLater = false
			s.renewDue(a)
		}
		a.writes++
		if a.writes >= s.sc.Agent.WritesPerLease {
			s.finish(a)
			return
		}
		s.scheduleAgent(a, s.sc.Agent.WorkGap.Sample(a.rngStall))
	}
}

func (a *agent) fence() leasefence.Fence {
	if a.lease == nil {
		return 0
	}
	return a.lease.Token.Fence
}

// leaseEvent is an event of kind about the agent and the lease it holds,
// if any, with its generation.
func (s *Sim) leaseEvent(a *agent, kind history.Kind, d time.Duration) history.Event {
	e := history.Event{Kind: kind, Agent: a.idx, Resource: a.resource, Other: -1, Dur: d}
	if a.lease != nil {
		e.Fence, e.Incarnation = a.lease.Token.Fence, a.epoch
	}
	return e
}

// pick chooses the resource of the agent's next attempt.
func (s *Sim) pick(a *agent) int {
	n := s.sc.Resources
	switch s.sc.Pick {
	case spec.PickFixed:
		return a.idx % n
	case spec.PickRoundRobin:
		a.picks++
		return (a.idx + a.picks - 1) % n
	}
	return a.rngPick.IntN(n)
}

func (s *Sim) startAcquire(a *agent, ri int, reqDelay, repDelay *time.Duration) {
	req, err := a.client.BeginAcquire(s.resources[ri].name)
	if err != nil {
		s.libraryError(a.idx, "BeginAcquire", err)
		return
	}
	a.gen++
	a.acq, a.acqSent, a.retries = req, s.now, 0
	a.resource = ri
	a.phase, a.denied = phAcquiring, false
	s.setState(a, AgentWaiting)
	s.sendAcquire(a, reqDelay, repDelay)
	if !a.scripted && s.mayLose() {
		s.schedule(s.now+s.retryWait(), timer{kind: tRetry, agent: int32(a.idx), gen: a.gen})
	}
}

// mayLose reports whether a message sent now could go unanswered. Only then
// does an acquire need a timer to retry or give up: on a lossless network
// that timer would only ever fire as a no-op, and in a crowd there is one
// per attempt.
func (s *Sim) mayLose() bool {
	return s.dropRequests > 0 || s.dropReplies > 0 || len(s.sc.Partitions) > 0
}

// retryWait is how long an agent waits for an acquire's reply before it
// resends the request, or gives up when it does not retry.
func (s *Sim) retryWait() time.Duration {
	if s.sc.Network.RetryAfter > 0 {
		return s.sc.Network.RetryAfter
	}
	return 4 * s.sc.TTL
}

func (s *Sim) sendAcquire(a *agent, reqDelay, repDelay *time.Duration) {
	m := s.newMessage(history.RequestAcquire, int32(a.idx))
	s.msgs[m].acquire = a.acq
	s.send(m, reqDelay, repDelay)
}

// acquireTimeout resends the pending acquire under the same request id, or
// gives up waiting.
func (s *Sim) acquireTimeout(a *agent) {
	if a.phase != phAcquiring {
		return
	}
	n := s.sc.Network
	if n.RetryAfter > 0 && a.retries < n.MaxRetries {
		a.retries++
		s.emit(history.Event{Kind: history.RequestRetried, Agent: a.idx, Resource: a.resource, Other: -1,
			Request: history.RequestAcquire, RequestID: a.acq.RequestID})
		s.sendAcquire(a, nil, nil)
		s.schedule(s.now+n.RetryAfter, timer{kind: tRetry, agent: int32(a.idx), gen: a.gen})
		return
	}
	s.emit(history.Event{Kind: history.AcquireAbandoned, Agent: a.idx, Resource: a.resource, Other: -1,
		Request: history.RequestAcquire, RequestID: a.acq.RequestID, Outcome: history.OutcomeNoReply})
	s.idle(a, a.think.Sample(a.rngThink))
}

// deliverReply is a reply reaching its agent.
func (s *Sim) deliverReply(m int32) {
	msg := s.msgs[m]
	s.freeMessage(m)
	a := &s.agents[msg.agent]
	switch msg.kind {
	case history.RequestAcquire:
		if a.phase != phAcquiring || msg.acquire.RequestID != a.acq.RequestID {
			return // a duplicate or late reply: the request is already settled
		}
		if msg.acqOut.OK {
			s.acquired(a, msg.acqOut.Grant, msg.epoch)
		} else {
			s.denied(a, msg.acqOut)
		}
	case history.RequestRenew:
		if !a.renewing || msg.renew.RequestID != a.renew.RequestID {
			return
		}
		a.renewing = false
		if msg.renOut.OK {
			s.renewed(a, msg.renOut.Grant)
		} else {
			s.renewRefused(a, msg.renOut.Reason)
		}
	}
}

func (s *Sim) acquired(a *agent, g leasefence.Grant, epoch int32) {
	l, err := a.client.CompleteAcquire(a.acq, g)
	if err != nil {
		s.libraryError(a.idx, "CompleteAcquire", err)
		return
	}
	a.gen++ // cancels the retry timer
	a.lease, a.writes, a.checked, a.lost, a.renewing, a.renewLater = l, 0, false, false, false, false
	a.epoch = epoch
	a.phase = phHolding
	a.until = s.believe(a, l)
	s.live.Acquisitions++
	s.emit(history.Event{Kind: history.Acquired, Agent: a.idx, Resource: a.resource, Fence: g.Token.Fence,
		Incarnation: epoch, Other: -1, RequestID: g.RequestID, Deadline: a.until})
	s.setState(a, a.displayState(s))
	if a.scripted {
		return
	}
	s.scheduleRenewal(a, a.acqSent)
	s.scheduleAgent(a, 0)
}

// believe sets the agent's belief from a fresh lease and returns the true
// instant it lasts until: the client's deadline in fenced mode, and the
// naive "reply arrival + TTL" in naive mode.
func (s *Sim) believe(a *agent, l *leasefence.Lease) time.Duration {
	if s.mode == Naive {
		now, _ := a.clock.Now()
		a.naiveUntil = now.Add(l.TTL)
		return a.trueAt(a.naiveUntil)
	}
	return a.trueAt(l.Deadline)
}

func (s *Sim) denied(a *agent, out leasefence.AcquireOutcome) {
	s.emit(history.Event{Kind: history.Denied, Agent: a.idx, Resource: a.resource, Other: s.agentIndexOf(out.HeldBy),
		RequestID: a.acq.RequestID, Reason: out.Reason, Dur: out.RetryAfter})
	if a.scripted {
		// A scripted agent does only what its script says: it does not
		// try again, so the denial ends its acquire.
		s.emit(history.Event{Kind: history.AcquireAbandoned, Agent: a.idx, Resource: a.resource, Other: -1,
			Request: history.RequestAcquire, RequestID: a.acq.RequestID, Outcome: history.OutcomeDenied})
		a.phase = phIdle
		s.setState(a, AgentIdle)
		return
	}
	wait := out.RetryAfter
	if wait <= 0 {
		wait = a.think.Sample(a.rngThink)
	}
	s.idle(a, wait)
	a.denied = true
	s.setState(a, AgentWaiting)
}

func (s *Sim) scheduleRenewal(a *agent, anchor time.Duration) {
	if s.sc.Agent.RenewAt <= 0 || a.scripted {
		return
	}
	at := max(anchor+time.Duration(s.sc.Agent.RenewAt*float64(s.sc.TTL)), s.now)
	s.schedule(at, timer{kind: tRenew, agent: int32(a.idx), gen: a.renewGen})
}

// renewDue sends a renewal, unless the agent is stalled: a stalled process
// does nothing until its stall ends.
func (s *Sim) renewDue(a *agent) {
	if !a.acting() || a.lease == nil || a.renewing {
		return
	}
	if a.phase == phStalled || s.now < a.stallUntil {
		a.renewLater = true
		return
	}
	s.sendRenewal(a, nil, nil)
}

func (s *Sim) sendRenewal(a *agent, reqDelay, repDelay *time.Duration) {
	req, err := a.client.BeginRenewal(a.lease)
	if err != nil {
		s.libraryError(a.idx, "BeginRenewal", err)
		return
	}
	a.renew, a.renewSent, a.renewing = req, s.now, true
	m := s.newMessage(history.RequestRenew, int32(a.idx))
	s.msgs[m].renew = req
	s.msgs[m].epoch = a.epoch
	s.send(m, reqDelay, repDelay)
}

func (s *Sim) renewed(a *agent, g leasefence.Grant) {
	l, err := a.client.CompleteRenewal(a.renew, g)
	if err != nil {
		s.libraryError(a.idx, "CompleteRenewal", err)
		return
	}
	a.lease = l
	a.until = s.believe(a, l)
	s.live.Renewals++
	s.emit(history.Event{Kind: history.Renewed, Agent: a.idx, Resource: a.resource, Fence: g.Token.Fence,
		Incarnation: a.epoch, Other: -1, RequestID: g.RequestID, Deadline: a.until})
	s.setState(a, a.displayState(s))
	s.scheduleRenewal(a, a.renewSent)
}

func (s *Sim) renewRefused(a *agent, reason leasefence.Reason) {
	e := s.leaseEvent(a, history.RenewRefused, 0)
	e.RequestID, e.Reason = a.renew.RequestID, reason
	s.emit(e)
	if a.scripted {
		return
	}
	if a.phase == phStalled {
		a.lost = true // it finds out when its stall ends, after its write
		return
	}
	s.giveUp(a, history.OutcomeRenewRefused)
}

// check is the agent's validity check before a write: HasExpired in fenced
// mode, now < expiresAt in naive mode. Both are true only at the instant
// they are computed.
func (s *Sim) check(a *agent) bool {
	ok := CheckValid(s.mode, a.lease, a.clock, a.naiveUntil)
	a.checked = ok
	kind := history.CheckPassed
	if !ok {
		kind = history.CheckFailed
	}
	s.emit(s.leaseEvent(a, kind, 0))
	return ok
}

// write performs the agent's write and reports whether it landed.
func (s *Sim) write(a *agent) bool {
	res := &s.resources[a.resource]
	t := a.lease.Token
	if s.mode == Naive {
		s.land(a, t.Fence)
		return true
	}
	err := res.gate.Commit(context.Background(), t, func(context.Context) error {
		s.land(a, t.Fence)
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
	res.refused++
	s.live.CommitsRefused++
	floor.Resource, floor.Holder, floor.Fence = res.name, a.name, t.Fence
	s.noteRefusal(floor)
	a.lane.mark(Mark{At: s.now, Kind: MarkRefused, Resource: int32(a.resource)})
	e := s.leaseEvent(a, history.CommitRefused, 0)
	e.Other, e.OtherFence = s.agentIndexOf(floor.FloorHolder), floor.FloorFence
	s.emit(e)
	return false
}

// land is a write landing at the resource. Whether it landed under a
// higher fence is the history's to say: the lanes read it from the reader.
func (s *Sim) land(a *agent, f leasefence.Fence) {
	res := &s.resources[a.resource]
	res.admitted++
	s.live.CommitsAdmitted++
	kind := history.CommitAdmitted
	if s.mode == Naive {
		kind = history.WriteLanded
	}
	e := s.leaseEvent(a, kind, 0)
	e.Fence = f
	s.emit(e)
	mark := MarkAdmitted
	if s.checker.Reader().LastWrite().Stale {
		s.live.StaleWritesLanded++
		mark = MarkStale
	}
	a.lane.mark(Mark{At: s.now, Kind: mark, Resource: int32(a.resource)})
}

// finish ends a lease after its last write: release it, or let it lapse.
func (s *Sim) finish(a *agent) {
	if s.sc.Agent.Release && a.lease != nil {
		s.sendRelease(a)
		s.giveUp(a, history.OutcomeReleased)
		return
	}
	s.giveUp(a, history.OutcomeDone)
}

func (s *Sim) sendRelease(a *agent) {
	m := s.newMessage(history.RequestRelease, int32(a.idx))
	s.msgs[m].release = a.lease.Token
	s.msgs[m].epoch = a.epoch
	s.send(m, nil, nil)
}

// giveUp ends the agent's belief in its lease now, for the reason given,
// and sends it back to thinking.
func (s *Sim) giveUp(a *agent, why history.Outcome) {
	if a.lease != nil {
		e := s.leaseEvent(a, history.LeaseAbandoned, 0)
		e.Outcome = why
		s.emit(e)
	}
	a.lease, a.renewing, a.renewLater, a.lost = nil, false, false, false
	a.renewGen++
	if a.scripted {
		a.phase = phIdle
		s.setState(a, AgentIdle)
		return
	}
	s.idle(a, a.think.Sample(a.rngThink))
}

func (s *Sim) idle(a *agent, after time.Duration) {
	a.gen++
	a.phase, a.denied = phIdle, false
	s.setState(a, AgentIdle)
	s.scheduleAgent(a, after)
}

// --- scripted timelines ---

func (s *Sim) script(act spec.Action) {
	i, _ := s.sc.AgentIndex(act.Agent)
	a := &s.agents[i]
	switch act.Do {
	case spec.ActAcquire:
		ri := 0
		if act.Resource != "" {
			ri, _ = s.sc.ResourceIndex(act.Resource)
		}
		s.startAcquire(a, ri, act.RequestDelay, act.ReplyDelay)
	case spec.ActCheck:
		s.check(a)
	case spec.ActStall:
		if a.acting() {
			a.phase = phStalled
		}
		s.setState(a, a.displayState(s))
		s.emit(s.leaseEvent(a, history.StallBegan, act.Duration))
		s.schedule(s.now+act.Duration, timer{kind: tStallEnd, agent: int32(a.idx)})
	case spec.ActWrite:
		if a.lease == nil || !a.checked {
			s.emit(s.leaseEvent(a, history.WriteSkipped, 0))
			return
		}
		s.write(a)
	case spec.ActRenew:
		if a.lease != nil && !a.renewing {
			s.sendRenewal(a, act.RequestDelay, act.ReplyDelay)
		}
	case spec.ActRelease:
		if a.lease != nil {
			s.sendRelease(a)
			s.giveUp(a, history.OutcomeReleased)
		}
	}
}

// stallEnd ends a scripted stall (gen 0) or a live one (gen 1).
func (s *Sim) stallEnd(a *agent, gen uint32) {
	if gen == 0 && a.phase == phStalled && a.scripted {
		a.phase = phHolding
	}
	s.emit(s.leaseEvent(a, history.StallEnded, 0))
	s.setState(a, a.displayState(s))
}

// --- live interventions ---

// Intervene applies iv now (its At is set to the current virtual instant)
// and records it, so the run can be replayed with Interventions.
func (s *Sim) Intervene(iv spec.Intervention) error {
	iv.At = s.now
	if err := s.sc.CheckIntervention(iv); err != nil {
		return fmt.Errorf("%w: intervention: %v", spec.ErrInvalidScenario, err)
	}
	s.sc.Interventions = append(s.sc.Interventions, iv)
	s.apply(iv)
	return nil
}

// Interventions returns the interventions applied so far, replayed or live.
func (s *Sim) Interventions() []spec.Intervention {
	return append([]spec.Intervention(nil), s.sc.Interventions...)
}

// Scenario returns the scenario being run, with the live interventions
// recorded so far: running it again replays this run.
func (s *Sim) Scenario() spec.Scenario {
	sc := s.sc
	sc.Interventions = s.Interventions()
	return sc
}

func (s *Sim) apply(iv spec.Intervention) {
	ivc := iv
	agentIdx := -1
	if iv.Agent != "" {
		agentIdx = s.agentIndexOf(iv.Agent)
	}
	s.emit(history.Event{Kind: history.Intervened, Agent: agentIdx, Resource: -1, Other: -1, Intervention: &ivc})
	switch iv.Kind {
	case spec.StallAgent:
		a := &s.agents[agentIdx]
		a.stallUntil = max(a.stallUntil, s.now+iv.Duration)
		s.emit(s.leaseEvent(a, history.StallBegan, iv.Duration))
		s.schedule(a.stallUntil, timer{kind: tStallEnd, agent: int32(a.idx), gen: 1})
		s.setState(a, a.displayState(s))
	case spec.SetDropRate:
		lossless := !s.mayLose()
		s.dropRequests, s.dropReplies = iv.Value, iv.Value
		if lossless && s.mayLose() {
			// Acquires sent on the lossless network have no timer, and
			// their replies can now be lost: give them one.
			for i := range s.agents {
				if a := &s.agents[i]; a.phase == phAcquiring && !a.scripted {
					s.schedule(s.now+s.retryWait(), timer{kind: tRetry, agent: int32(a.idx), gen: a.gen})
				}
			}
		}
	case spec.RestartCoordinator:
		s.restart(iv.Persist)
	case spec.TogglePush:
		s.push = !s.push
	}
}

// CheckValid is an agent's validity check before a write, as every runner
// makes it: the client's HasExpired in fenced mode, the naive "now <
// expiresAt" on the agent's clock in naive mode (naiveUntil: the reply's
// arrival + TTL). Either is true only at the instant it is computed. A nil
// lease is never valid.
func CheckValid(mode Mode, l *leasefence.Lease, clock leasefence.Clock, naiveUntil leasefence.Instant) bool {
	if l == nil {
		return false
	}
	if mode == Naive {
		now, err := clock.Now()
		before, err2 := now.Before(naiveUntil)
		return err == nil && err2 == nil && before
	}
	expired, err := l.HasExpired()
	return err == nil && !expired
}
