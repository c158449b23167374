package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// The rules below judge the claims a history's events make about each
// other as the events come, in one pass: a refusal names a floor, and the
// history must show that floor raised; a grant reuses a fence, and the
// history must show a restart that lost the counter since; a write lands,
// and the history must show the lease it landed under, and must not also
// show it refused; a push raised a gate's floor, and nothing below it may
// be admitted after. The state they keep is a few bytes per lease
// generation, agent and resource, never one record per event.

// ruleState is the checker's part of the history that the rules need.
type ruleState struct {
	agents []agentMark  // per agent
	res    []resourceMk // per resource

	// Fences: the highest minted in the whole history, and the highest
	// minted since the last restart that lost the counter.
	top, topSinceLoss leasefence.Fence
	// In a real-time history, counted holds top and topSinceLoss as they
	// stood after each grant that raised them and each restart that lost
	// the counter, in history order; lost is the instant of the last such
	// restart (-1 before any). See mint.
	real    bool
	counted []counted
	lost    time.Duration

	fenceReuses, unexcusedReuses int
	// The unexcused reuses a failover explains: those since the beginning
	// of the first fault that ended failed over (OutcomeFailedOver), whose
	// count at its beginning is failoverFrom (-1 before any), and every
	// one after. openFaults holds, for each fault under way, the count of
	// unexcused reuses at its beginning.
	failoverFrom        int
	openFaults          []openFault
	unexplainedRefusals int
	unexplainedLandings int
	unexplainedReleases int
	refusedLanded       int
	belowPush           int
	belowOwnFloor       int
	cx                  counterexamples
}

// counted is the lab's coordinator's counter as the history shows it at
// an instant: the highest fence recorded by then, and the highest since
// the last restart that lost the counter.
type counted struct {
	at             time.Duration
	top, sinceLoss leasefence.Fence
}

// openFault is a fault under way: its beginning, and the count of
// unexcused reuses then.
type openFault struct {
	began  *Event
	reuses int
}

// agentMark is an agent's last landed and last refused write, by id, so
// that a write reported both ways is seen (an agent has one write in
// flight at a time), and its last acquire request with the earliest
// instant a copy of it was sent (one acquire in flight at a time too).
type agentMark struct {
	landed, refused string
	acquire         string
	acquireSent     time.Duration
}

// resourceMk is what the rules know of one resource's gate.
type resourceMk struct {
	refusals int // refusals so far, to number them
	// admitted is the highest fence the gate admitted, and admittedBy its
	// writer: the gate's own floor, as far as the record shows it.
	admitted   leasefence.Fence
	admittedBy int32
	// pushed is the highest fence pushed to the gate, and the instant the
	// push was known applied (its event's instant plus its Dur); inForce is
	// the highest pushed fence known applied by the last landing judged.
	pushed        leasefence.Fence
	pushedApplied time.Duration
	inForce       leasefence.Fence
	// minted is the highest fence a library's lock minted on the
	// resource, and mintedSinceLoss the highest since the last restart
	// that lost the counter (see mint).
	minted, mintedSinceLoss leasefence.Fence
}

func newRuleState(h *Header) ruleState {
	return ruleState{agents: make([]agentMark, len(h.Agents)), res: make([]resourceMk, len(h.Resources)), failoverFrom: -1,
		real: !Simulated(h.Backend), lost: -1}
}

// add judges e, which the Reader has just folded in.
func (c *Checker) rule(e *Event) {
	s := &c.rules
	rd := c.read
	switch e.Kind {
	case RequestSent:
		s.sent(e)
	case Granted:
		c.mint(rd.Generation(rd.Latest(e.Resource)), e)
	case CoordinatorRestarted:
		if e.Outcome == OutcomeCounterLost {
			s.topSinceLoss = 0
			for i := range s.res {
				s.res[i].mintedSinceLoss = 0
			}
			s.count(e.At)
			s.lost = e.At
		}
	case FaultBegan, FaultEnded:
		s.fault(e)
	case AdmitPushed:
		c.pushApplied(e)
	case Expired:
		if gi := rd.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			rd.Generation(gi).ended = true
		}
	case Released:
		c.release(e)
	case CommitAdmitted, WriteLanded:
		c.landed(e, rd.LastWrite())
	case CommitRefused:
		c.refused(e, rd.LastWrite())
	}
}

// mint judges a newly minted generation's fence, granted by event e: a
// fence must be above every fence minted before it on its resource, in
// the coordinator's order, or else it is a reuse, excused only by a
// restart that lost the counter between the two mints.
//
// On one resource the history's order is the coordinator's: a lease ends
// before the next is granted, and the lab's coordinator stamps a grant no
// earlier than it minted it. A library's lock (a header contender whose
// generations it numbers) is recorded when its reply is back with the
// lab, so a generation below the resource's newest is one it made earlier
// and the lab recorded late (Header.LateGrant), not a reuse.
//
// The lab's coordinator mints from one counter, so a fence must also be
// above those it minted before on other resources; but the history shows
// that order only where its times are the coordinator's own (the
// simulator's). In a real-time history grants on different resources
// are recorded as their replies come back, in no order the coordinator
// kept (the contend scenario's concurrent acquires); there a fence minted
// on another resource counts only if its grant was recorded before the
// request of this one was first sent (see before), when the coordinator
// cannot have minted this one first.
func (c *Checker) mint(g *Generation, e *Event) {
	s := &c.rules
	var m *resourceMk
	if g.Resource >= 0 && int(g.Resource) < len(s.res) {
		m = &s.res[g.Resource]
	}
	library := c.h.Contender(c.mode).Generations != ""
	if library && m != nil && c.h.LateGrant(c.mode, g.Fence, m.minted) {
		return
	}
	var top, sinceLoss leasefence.Fence
	if m != nil {
		top, sinceLoss = m.minted, m.mintedSinceLoss
	}
	if !library {
		all, allSinceLoss := s.top, s.topSinceLoss
		if s.real {
			all, allSinceLoss = s.before(e)
		}
		top, sinceLoss = max(top, all), max(sinceLoss, allSinceLoss)
	}
	if g.Fence <= top {
		s.fenceReuses++
		s.cx.add(Counterexample{Kind: FenceReuse, AtMS: ms(e.At), Resource: c.resourceName(g.Resource),
			Holder: c.agentName(g.Agent), Fence: g.Fence, OtherFence: top,
			Detail: fmt.Sprintf("fence %d minted after fence %d (coordinator incarnation %d)", g.Fence, top, g.Incarnation+1)})
		if g.Fence <= sinceLoss {
			s.unexcusedReuses++
		}
	}
	if m != nil {
		m.minted, m.mintedSinceLoss = max(m.minted, g.Fence), max(m.mintedSinceLoss, g.Fence)
	}
	if !library && (g.Fence > s.top || g.Fence > s.topSinceLoss) {
		s.top, s.topSinceLoss = max(s.top, g.Fence), max(s.topSinceLoss, g.Fence)
		s.count(e.At)
	}
}

// sent notes the earliest copy of each agent's acquire request.
func (s *ruleState) sent(e *Event) {
	if e.Request != RequestAcquire || e.RequestID == "" || e.Agent < 0 || e.Agent >= len(s.agents) {
		return
	}
	if a := &s.agents[e.Agent]; a.acquire != e.RequestID || e.At < a.acquireSent {
		a.acquire, a.acquireSent = e.RequestID, e.At
	}
}

// count notes, in a real-time history, the counter as it stands at at.
func (s *ruleState) count(at time.Duration) {
	if s.real {
		s.counted = append(s.counted, counted{at: at, top: s.top, sinceLoss: s.topSinceLoss})
	}
}

// before returns the highest fence whose grant was recorded before the
// request that won grant e was first sent, and the highest of those since
// the last restart that lost the counter: what the coordinator had
// minted before it minted e's fence, as far as the record proves it
// (none when the history has no send of e's request). A restart that lost
// the counter recorded since the send may have come between the two
// mints, and then excuses the reuse.
func (s *ruleState) before(e *Event) (top, sinceLoss leasefence.Fence) {
	if e.Agent < 0 || e.Agent >= len(s.agents) || e.RequestID == "" || s.agents[e.Agent].acquire != e.RequestID {
		return 0, 0
	}
	sent := s.agents[e.Agent].acquireSent
	// The history is in the order of its instants: counted is too.
	i, _ := slices.BinarySearchFunc(s.counted, sent, func(c counted, at time.Duration) int { return cmp.Compare(c.at, at) })
	if i == 0 {
		return 0, 0
	}
	k := s.counted[i-1]
	if s.lost >= sent {
		return k.top, 0
	}
	return k.top, k.sinceLoss
}

// fault follows the faults under way, for the reuses a failover explains.
func (s *ruleState) fault(e *Event) {
	if e.Kind == FaultBegan {
		if !e.Instant() {
			b := *e
			s.openFaults = append(s.openFaults, openFault{began: &b, reuses: s.unexcusedReuses})
		}
		return
	}
	for i := len(s.openFaults) - 1; i >= 0; i-- {
		if f := s.openFaults[i]; f.began.Same(e) {
			if e.Outcome == OutcomeFailedOver && s.failoverFrom < 0 {
				s.failoverFrom = f.reuses
			}
			s.openFaults = slices.Delete(s.openFaults, i, i+1)
			return
		}
	}
}

// failoverReuses splits the unexcused reuses into those a failover
// explains and the others.
func (s *ruleState) failoverReuses() (failover, others int) {
	if s.failoverFrom < 0 {
		return 0, s.unexcusedReuses
	}
	return s.unexcusedReuses - s.failoverFrom, s.failoverFrom
}

// release judges a release the coordinator granted: of a generation it
// granted and had not let go. A coordinator that says it released a lease
// it had already let go released something else (a lease keyed by its
// holder's name, say). A release dated after the next generation's grant
// is no violation in itself: a runner may learn of a release after the
// grant it made possible.
func (c *Checker) release(e *Event) {
	s, rd := &c.rules, c.read
	gi := rd.Find(e.Incarnation, e.Resource, e.Fence)
	var why string
	switch {
	case gi < 0:
		why = "a lease the history never granted"
	case rd.Generation(gi).ended || rd.Generation(gi).Forgot:
		why = "a lease it had already let go"
	default:
		rd.Generation(gi).ended = true
		return
	}
	if gi >= 0 {
		rd.Generation(gi).ended = true
	}
	s.unexplainedReleases++
	if _, na := c.h.NotExpressible(c.mode, RuleReleaseAfterEnd); na {
		return // the lock's API cannot say the lease was gone: no counterexample
	}
	s.cx.add(Counterexample{Kind: UnexplainedRelease, AtMS: ms(e.At), Resource: c.resourceName(int32(e.Resource)),
		Holder: c.agentName(int32(e.Agent)), Fence: e.Fence,
		Detail: c.releaseDetail(e, why)})
}

// releaseDetail says what a release of a lease no longer live (why) was:
// the coordinator's grant of it, or, for a lock run in its place, the
// lock's answer, its generation called a fence only where it is one.
func (c *Checker) releaseDetail(e *Event, why string) string {
	word := c.h.FenceWord(c.mode)
	if c.h.Contender(c.mode).Generations != "" {
		return fmt.Sprintf("the lock answered nil to the release of %s %d of %s, %s", word, e.Fence, c.agentName(int32(e.Agent)), why)
	}
	return fmt.Sprintf("the coordinator released %s %d of %s: %s", word, e.Fence, c.agentName(int32(e.Agent)), why)
}

// pushApplied records a push that reached the gate: its fence is the
// gate's floor from then on, and its generation a floor a refusal may name.
func (c *Checker) pushApplied(e *Event) {
	m := &c.rules.res[e.Resource]
	applied := e.At + max(e.Dur, 0)
	if e.Fence > m.pushed {
		if m.pushedApplied <= e.At {
			m.inForce = max(m.inForce, m.pushed)
		}
		m.pushed, m.pushedApplied = e.Fence, applied
	}
	if e.Outcome == OutcomeBelowFloor {
		return
	}
	if gi := c.read.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
		c.read.Generation(gi).raised = true
	}
}

// landed judges a landing: it must be under a generation the history
// granted its writer on that resource, must not be a write also reported
// refused, and, through a gate, must not be below a fence pushed to it nor
// below one the same gate admitted.
func (c *Checker) landed(e *Event, w *Write) {
	s := &c.rules
	if w.Gen < 0 || c.read.Generation(w.Gen).Agent != w.Agent {
		s.unexplainedLandings++
		s.cx.add(Counterexample{Kind: UnexplainedLanding, AtMS: ms(e.At), Resource: c.resourceName(w.Resource),
			Holder: c.agentName(w.Agent), Fence: w.Fence,
			Detail: fmt.Sprintf("a write under fence %d landed at %s, where the history granted %s no lease under that fence",
				w.Fence, c.resourceName(w.Resource), c.agentName(w.Agent))})
	} else {
		c.read.Generation(w.Gen).raised = true
	}
	if a := &s.agents[e.Agent]; e.RequestID != "" {
		if a.refused == e.RequestID {
			c.refusedAndLanded(e)
		}
		a.landed = e.RequestID
	}
	if e.Kind != CommitAdmitted {
		return
	}
	m := &s.res[e.Resource]
	c.belowOwnFloor(m, w, e.At)
	if m.pushedApplied <= e.At {
		m.inForce = max(m.inForce, m.pushed)
	}
	if w.Fence < m.inForce {
		s.belowPush++
		s.cx.add(Counterexample{Kind: AdmittedBelowPush, AtMS: ms(e.At), Resource: c.resourceName(w.Resource),
			Holder: c.agentName(w.Agent), Fence: w.Fence, OtherFence: m.inForce,
			Detail: fmt.Sprintf("the gate admitted fence %d after the coordinator's push of fence %d had reached it", w.Fence, m.inForce)})
	}
}

// belowOwnFloor judges an admission against the highest fence the same
// gate had admitted: below it, or equal to it under another writer (a
// token conflict), a correct gate refuses, whatever the coordinator did.
// A coordinator restart that lost the counter excuses the reissued fence,
// not its admission: the gate's floor is its own, and the record shows no
// loss of it. A stale write is counted as stale, not here as well.
func (c *Checker) belowOwnFloor(m *resourceMk, w *Write, at time.Duration) {
	floor, by := m.admitted, m.admittedBy
	if w.Fence > floor || w.Fence == floor && w.Agent == by {
		m.admitted, m.admittedBy = w.Fence, w.Agent
		return
	}
	if floor == 0 || w.Stale {
		return
	}
	s := &c.rules
	s.belowOwnFloor++
	s.cx.add(Counterexample{Kind: AdmittedBelowFloor, AtMS: ms(at), Resource: c.resourceName(w.Resource),
		Holder: c.agentName(w.Agent), Fence: w.Fence, Other: c.agentName(by), OtherFence: floor,
		Detail: fmt.Sprintf("the gate admitted fence %d after it had admitted fence %d of %s", w.Fence, floor, c.agentName(by))})
}

func (c *Checker) refusedAndLanded(e *Event) {
	c.rules.refusedLanded++
	c.rules.cx.add(Counterexample{Kind: RefusedWriteLanded, AtMS: ms(e.At), Resource: c.resourceName(int32(e.Resource)),
		Holder: c.agentName(int32(e.Agent)), Fence: e.Fence,
		Detail: fmt.Sprintf("write %s was reported refused, and the resource's record has it landed", e.RequestID)})
}

// refused judges a refusal: the floor it names must be above the refused
// fence (or equal to it under another holder: a token conflict), and the
// history must have shown that floor raised at that resource before.
func (c *Checker) refused(e *Event, w *Write) {
	s := &c.rules
	m := &s.res[e.Resource]
	m.refusals++
	if a := &s.agents[e.Agent]; e.RequestID != "" {
		if a.landed == e.RequestID {
			c.refusedAndLanded(e)
		}
		a.refused = e.RequestID
	}
	why := c.unexplained(w)
	if why == "" {
		return
	}
	if w.LeaseNotLive {
		lease := c.leaseUnexplained(w)
		if lease == "" {
			return
		}
		why = lease + ", and " + why
	}
	s.unexplainedRefusals++
	s.cx.add(Counterexample{Kind: UnexplainedRefusal, AtMS: ms(w.At), Resource: c.resourceName(w.Resource),
		Holder: c.agentName(w.Agent), Fence: w.Fence, Other: c.agentName(w.FloorAgent), OtherFence: w.FloorFence,
		Detail: fmt.Sprintf("refusal #%d at %s: %s", m.refusals, c.resourceName(w.Resource), why)})
}

// unexplained says why refusal w has no cause in the history, or "".
func (c *Checker) unexplained(w *Write) string {
	// Made only for a refusal the history does not explain: most are.
	floor := func() string {
		return fmt.Sprintf("the floor it names, %s@%d,", c.agentName(w.FloorAgent), w.FloorFence)
	}
	switch {
	case w.FloorFence < w.Fence:
		return floor() + " is below the refused fence"
	case w.FloorFence == w.Fence && w.FloorAgent == w.Agent:
		return floor() + " is the refused write's own token"
	}
	rd := c.read
	for gi := rd.latest[w.Resource]; gi >= 0; gi = rd.Generation(gi).prev {
		if g := rd.Generation(gi); g.Fence == w.FloorFence && g.Agent == w.FloorAgent && g.raised {
			return ""
		}
	}
	if f := rd.forgeries[w.Resource].high; f > 0 && f == w.FloorFence {
		return "" // a forger's landed write moved the floor (its own violation)
	}
	return floor() + " was never raised there by an admitted commit or a push"
}

// leaseUnexplained says why w, refused because its lease was not live,
// has no cause in the history, or "": the history must have the lease
// over by the refusal. Ended by an event before it (an expiry, a release,
// a restart that forgot it), superseded by a newer grant on the resource,
// or past the earliest instant its coordinator expiry can have been
// (Generation.EarliestEnd): the refusal is stamped when its answer came,
// no earlier than the gate read the lease, so one stamped before that
// instant says a lease ended that cannot have.
func (c *Checker) leaseUnexplained(w *Write) string {
	if w.Gen < 0 {
		return "" // the history has no lease of the writer's to be live
	}
	rd := c.read
	g := rd.Generation(w.Gen)
	switch {
	case g.Lapsed(), rd.Latest(int(w.Resource)) > w.Gen:
		return ""
	case g.EarliestEnd < 0 && !g.Believed():
		return fmt.Sprintf("it calls the lease %s@%d not live, and its holder never completed the acquire", c.agentName(g.Agent), g.Fence)
	case g.EarliestEnd < 0:
		return fmt.Sprintf("it calls the lease %s@%d not live, and the history has no sending of the request its grant answered to date its end by",
			c.agentName(g.Agent), g.Fence)
	case w.At >= g.EarliestEnd:
		return ""
	}
	return fmt.Sprintf("it calls the lease %s@%d not live %s before the earliest its coordinator expiry can have been",
		c.agentName(g.Agent), g.Fence, FormatDuration(g.EarliestEnd-w.At))
}

func (c *Checker) agentName(i int32) string {
	if i < 0 || int(i) >= len(c.h.Agents) {
		return ""
	}
	return c.h.Agents[i]
}

func (c *Checker) resourceName(i int32) string {
	if i < 0 || int(i) >= len(c.h.Resources) {
		return ""
	}
	return c.h.Resources[i]
}
