package history

import (
	"time"

	"github.com/leasefence/lab/leasefence"
)

// AgentTrack follows one agent through its events to what a display shows
// of it: the one reading of the history, shared by every display, of when
// an agent waits, holds, stalls or believes a lease the coordinator let
// go. An agent waits from sending an acquire until it is granted or gives
// the acquire up (or, denied, until it gives up wanting the lease); holds
// from the grant until it gives the lease up or, if it never does, until
// its belief ends and its last write is done (the checker's acting
// interval); stalls between a stall's start and end; and believes an
// expired lease once the reader has its generation lapsed while it acts;
// a refused write or a failed check ends its belief, as it tells the agent.
// The zero AgentTrack is not ready: use NewAgentTrack.
type AgentTrack struct {
	acquiring, acting, denied, lapsed bool
	stalls                            int // stalls under way (a live stall can fall inside a scripted one)
	resource                          int
	fence                             leasefence.Fence
	// beliefEnd is the true instant until which the agent believes its
	// lease valid (its deadline); past it, and with no write in flight, it
	// no longer acts as the holder even if it has not noticed (a scripted
	// agent never does). beliefOver records that.
	beliefEnd  time.Duration
	beliefOver bool
	lastAct    time.Duration // the end of its last write or stall
}

// NewAgentTrack returns the track of an agent that has done nothing yet.
func NewAgentTrack() AgentTrack { return AgentTrack{resource: -1} }

// State is what the agent is doing, as a display shows it.
func (t *AgentTrack) State() AgentState {
	switch {
	case t.acquiring:
		return AgentWaiting
	case t.acting && t.beliefOver:
		return AgentIdle
	case t.acting && t.lapsed:
		return AgentZombie
	case t.acting && t.stalls > 0:
		return AgentStalled
	case t.acting:
		return AgentHolding
	case t.denied:
		return AgentWaiting
	}
	return AgentIdle
}

// Lease returns the resource and fence of the lease the agent acts on, or
// -1 and 0 when it acts on none.
func (t *AgentTrack) Lease() (resource int, fence leasefence.Fence) {
	if t.acting && !t.beliefOver {
		return t.resource, t.fence
	}
	return -1, 0
}

// Wants returns the resource the agent holds or wants, or -1.
func (t *AgentTrack) Wants() int {
	if t.acquiring || t.denied || (t.acting && !t.beliefOver) {
		return t.resource
	}
	return -1
}

// BeliefEnd returns the true instant until which the agent believes its
// lease valid, and whether it acts on a lease at all.
func (t *AgentTrack) BeliefEnd() (time.Duration, bool) {
	return t.beliefEnd, t.acting && !t.beliefOver
}

// Stalls is how many stalls of the agent are under way.
func (t *AgentTrack) Stalls() int { return t.stalls }

// EndStalls ends every stall under way: the run ended in one.
func (t *AgentTrack) EndStalls() { t.stalls = 0 }

// Settle ends the agent's belief at its deadline if now is past it and no
// write is in flight (a stall). It returns the instant the belief ended
// (the later of the deadline and the last write) and true, when it ended
// it now.
func (t *AgentTrack) Settle(now time.Duration) (time.Duration, bool) {
	if !t.acting || t.beliefOver || t.stalls > 0 || now <= t.beliefEnd {
		return 0, false
	}
	t.beliefOver = true
	return max(t.beliefEnd, t.lastAct), true
}

// Add folds in e, an event of this agent (index agent). r is the Reader of
// the mode, to which e has already been added.
func (t *AgentTrack) Add(e *Event, r *Reader, agent int) {
	switch e.Kind {
	case RequestSent:
		if e.Request == RequestAcquire {
			t.acquiring, t.denied, t.resource = true, false, e.Resource
		}
	case Acquired:
		t.acquiring, t.acting, t.denied, t.beliefOver = false, true, false, false
		t.resource, t.fence, t.beliefEnd = e.Resource, e.Fence, e.Deadline
		t.lapsed = lapsed(r, agent)
	case Renewed:
		t.beliefEnd, t.beliefOver = e.Deadline, false
	case Denied:
		t.acquiring, t.denied = false, true // it still wants the lease, unless it gives the acquire up
	case AcquireAbandoned:
		t.acquiring, t.denied = false, false
	case LeaseAbandoned:
		t.acting, t.acquiring, t.lapsed, t.denied, t.beliefOver = false, false, false, false, false
	case StallBegan:
		t.stalls++
	case StallEnded:
		if t.stalls > 0 {
			t.stalls--
		}
		t.lastAct = e.At
	case CommitAdmitted, WriteLanded:
		t.lastAct = e.At
	case CommitRefused, CheckFailed:
		// The agent has learnt its lease is over: a gate refused its
		// fence, or its own check failed. It believes no longer.
		t.lastAct = e.At
		if t.acting {
			t.beliefOver = true
		}
	}
}

// Lapse marks the agent as believing a lease the coordinator let go, if
// it acts on one the reader has lapsed (after an Expired, Released or
// CoordinatorRestarted event); it reports whether that changed.
func (t *AgentTrack) Lapse(r *Reader, agent int) bool {
	if t.acting && !t.lapsed && lapsed(r, agent) {
		t.lapsed = true
		return true
	}
	return false
}

// lapsed reports whether the generation agent believes it holds has lapsed
// at the coordinator, as the reader has it.
func lapsed(r *Reader, agent int) bool {
	g := r.Holding(agent)
	return g >= 0 && r.Generation(g).Lapsed()
}
