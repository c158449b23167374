package tracing

import (
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leaseotel"
)

// --- renewals and releases ---

func (m *modeState) renewSent(e history.Event) {
	g := m.holding(e)
	if g == nil {
		return
	}
	q := &request{kind: history.RequestRenew, id: e.RequestID, gen: g, copies: 1}
	q.span = m.child(g, leaseotel.SpanLeaseRenew, e.At, optKindClient, append(m.startAttrs(), leaseotel.LeaseRequestID.String(e.RequestID)))
	g.open = append(g.open, q)
	m.agent(e.Agent).renew = q
}

func (m *modeState) renewAnswered(e history.Event) {
	q := m.agent(e.Agent).renew
	if q == nil || q.done {
		return
	}
	if e.Kind == history.Renewed {
		if q.id == e.RequestID {
			m.finish(q, e.At, leaseotel.OutcomeRenewed, "", "",
				append(m.startAttrs(), leaseotel.LeaseBelievedFor.Int64((e.Deadline-e.At).Milliseconds()))...)
		}
		return
	}
	m.finish(q, e.At, leaseotel.OutcomeRefused, leaseotel.ErrorLeaseLost, "renewal refused: "+string(e.Reason),
		append(m.startAttrs(), leaseotel.LeaseReason.String(string(e.Reason)))...)
}

func (m *modeState) releaseSent(e history.Event) {
	g := m.holding(e)
	if g == nil {
		g = m.traceOf(&e)
	}
	if g == nil {
		return
	}
	q := &request{kind: history.RequestRelease, gen: g, copies: 1, arrives: e.At + e.Dur}
	q.span = m.child(g, leaseotel.SpanLeaseRelease, e.At, optKindClient, m.startAttrs())
	g.open = append(g.open, q)
	m.agent(e.Agent).release = q
}

func (m *modeState) released(e history.Event) {
	g := m.traceOf(&e)
	if g == nil {
		return
	}
	for _, q := range g.open {
		if q.kind == history.RequestRelease && !q.done {
			m.finish(q, e.At, leaseotel.OutcomeReleased, "", "")
		}
	}
	m.rootEvent(g, EventReleased, e.At)
	m.coordinatorEnded(g, e.At)
}

// releaseRefused ends the release the coordinator refused: the lease had
// already ended there (expired, or superseded by a restart's reissue).
func (m *modeState) releaseRefused(e history.Event) {
	q := m.agent(e.Agent).release
	if q == nil || q.done {
		return
	}
	if l := m.lease(q.gen); int(l.Resource) != e.Resource || l.Fence != e.Fence {
		return
	}
	m.finish(q, e.At, leaseotel.OutcomeRefused, "", "", append(m.startAttrs(), leaseotel.LeaseReason.String(string(e.Reason)))...)
}

// --- the coordinator's side ---

// coordinatorSide returns the generation a coordinator-side event is about.
// The coordinator can be seen to mint a fence before its holder hears of it
// (a push, an expiry before a slow or lost reply): then the generation
// starts at the pending acquire's send, or at start if there is none. It
// returns nil for a generation the history never minted.
func (m *modeState) coordinatorSide(e history.Event, start time.Duration) *generation {
	id := m.read.Find(e.Incarnation, e.Resource, e.Fence)
	if id < 0 {
		return nil
	}
	if g := m.traceOf(&e); g != nil {
		return g
	}
	if at := m.agent(e.Agent).attempt; at != nil && at.resource == e.Resource && at.gen == nil {
		at.gen = m.generation(id, at.sent)
		m.takeDenials(at.gen, at)
		return at.gen
	}
	g := m.generation(id, max(start, 0))
	g.holderDone = true // no acquire of its holder is waiting for it
	return g
}

func (m *modeState) coordinatorEnded(g *generation, at time.Duration) {
	g.touch(at)
	if !g.coordEnded {
		g.coordEnded, g.coordEnd = true, at
	}
	m.tryEnd(g)
}

func (m *modeState) pushed(e history.Event) {
	g := m.coordinatorSide(e, e.At)
	if g == nil {
		return
	}
	raised := e.Outcome == "" && e.OtherFence == e.Fence
	outcome := leaseotel.OutcomeRaised
	if !raised {
		outcome = leaseotel.OutcomeBelowFloor
	}
	attrs := append(m.startAttrs(), leaseotel.FenceFloor.Int64(int64(e.OtherFence)), leaseotel.FenceOutcome.String(outcome))
	if e.Other >= 0 {
		attrs = append(attrs, leaseotel.FenceFloorHolder.String(m.r.agent(e.Other)))
	}
	m.rootEvent(g, EventAdmitPushed, e.At, attrs...)
	if raised {
		m.floors[e.Resource] = floorRef{fence: e.Fence, agent: e.Agent, span: g.root.SpanContext()}
	}
}

func (m *modeState) restarted(e history.Event) {
	for _, g := range m.sortedGens() {
		if m.lease(g).Incarnation < e.Incarnation && !g.coordEnded {
			m.rootEvent(g, EventRestarted, e.At, leaseotel.LeaseReason.String(string(e.Outcome)))
			m.coordinatorEnded(g, e.At)
		}
	}
}

// --- writes ---

func (m *modeState) commit(e history.Event) {
	g := m.holding(e)
	if g == nil {
		return
	}
	refused := e.Kind == history.CommitRefused
	w := m.read.LastWrite()
	stale := w.Stale
	if stale {
		e.Other, e.OtherFence = int(w.FloorAgent), w.FloorFence
	}
	attrs := m.startAttrs()
	var links []trace.Link
	outcome := leaseotel.OutcomeAdmitted
	if refused || stale {
		outcome = leaseotel.OutcomeRefused
		if stale {
			outcome = leaseotel.OutcomeStale
		}
		attrs = append(attrs, leaseotel.FenceFloor.Int64(int64(e.OtherFence)))
		if e.Other >= 0 {
			attrs = append(attrs, leaseotel.FenceFloorHolder.String(m.r.agent(e.Other)))
		}
		if f := m.floors[e.Resource]; f.fence == e.OtherFence && f.agent == e.Other && f.span.IsValid() {
			links = append(links, trace.Link{SpanContext: f.span, Attributes: []attribute.KeyValue{
				leaseotel.LeaseHolder.String(m.r.agent(f.agent)), leaseotel.LeaseFence.Int64(int64(f.fence)),
			}})
		}
	}
	attrs = append(attrs, leaseotel.FenceOutcome.String(outcome))
	var errType string
	var err error
	if refused {
		rej := leasefence.Rejection{Resource: m.r.resource(e.Resource), Holder: m.r.agent(e.Agent), Fence: e.Fence,
			FloorHolder: m.r.agent(e.Other), FloorFence: e.OtherFence}
		err, errType = &leasefence.StaleFenceError{Rejection: rej}, leaseotel.ErrorStaleFence
		if e.OtherFence == e.Fence {
			errType = leaseotel.ErrorTokenConflict
			err = fmt.Errorf("%w: fence %d at %q belongs to %s", leasefence.ErrTokenConflict, e.Fence, rej.Resource, rej.FloorHolder)
		}
		attrs = append(attrs, leaseotel.ErrorType.String(errType))
	}
	// The write began at the holder's validity check before it (the
	// stall, if any, lies between): a write at the instant of its check
	// took no time, and is an event on the lease, not a span.
	start := e.At
	if a := m.agent(e.Agent); a.checkedUnder == g {
		start = min(a.checkedAt, e.At)
		a.checkedUnder = nil
	}
	if start < e.At {
		sp := m.child(g, leaseotel.SpanFenceCommit, start, optKindInternal, attrs, links...)
		if refused {
			sp.RecordError(err, m.r.ts(e.At))
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End(m.r.ts(e.At))
		g.touch(e.At)
	} else {
		m.rootEvent(g, EventFenceCommit, e.At, attrs...)
	}
	if !refused && !stale {
		m.floors[e.Resource] = floorRef{fence: e.Fence, agent: e.Agent, span: g.root.SpanContext()}
	}
}

// --- ending ---

// tryEnd ends a generation once neither side can add to it: the
// coordinator is done with the lease and its holder has moved on.
func (m *modeState) tryEnd(g *generation) {
	if g.coordEnded && g.holderDone {
		m.end(g, max(g.coordEnd, g.last))
	}
}

func (m *modeState) end(g *generation, at time.Duration) {
	for _, q := range g.open {
		if q.done {
			continue
		}
		switch {
		case q.kind == history.RequestRelease && g.coordEnded:
			// The lease had ended at the coordinator before this release
			// could free it: the release is refused when it arrives.
			m.finish(q, max(q.arrives, g.coordEnd), leaseotel.OutcomeRefused, "", "")
		default:
			m.finish(q, at, leaseotel.OutcomeUnanswered, "", "")
		}
	}
	for _, d := range g.denials {
		attrs := append(m.startAttrs(),
			leaseotel.LeaseRequester.String(m.r.agent(d.agent)),
			leaseotel.LeaseReason.String(string(d.reason)),
			leaseotel.LeaseRetryAfter.Int64(d.retryAfter.Milliseconds()),
			leaseotel.LeaseDenials.Int(d.count))
		if d.count > 1 {
			attrs = append(attrs, leaseotel.LeaseDeniedFor.Int64((d.last - d.first).Milliseconds()))
		}
		m.addEvent(g.root, EventAcquireDenied, d.first, attrs...)
	}
	if g.denials != nil {
		m.spareDenials = append(m.spareDenials, g.denials[:0])
		g.denials = nil
	}
	g.root.End(m.r.ts(max(at, g.last)))
	m.traces[g.id] = nil
	if a := m.agents[m.lease(g).Agent]; a != nil && a.holding == g {
		a.holding, a.renew = nil, nil
	}
}

func (m *modeState) sortedGens() []*generation {
	var gens []*generation
	for _, g := range m.traces {
		if g != nil {
			gens = append(gens, g)
		}
	}
	slices.SortFunc(gens, m.compare)
	return gens
}

// close ends what is still open, as of the run's stop (or the mode's last
// event, if later).
func (m *modeState) close(stopped time.Duration) {
	m.last = max(m.last, stopped)
	for i, a := range m.agents {
		if a != nil && a.attempt != nil {
			m.settle(i, a.attempt, m.last, leaseotel.OutcomeUnanswered, "", "")
		}
	}
	for _, g := range m.sortedGens() {
		end := m.last
		if g.coordEnded {
			end = max(g.coordEnd, g.last)
		}
		m.end(g, end)
	}
}
