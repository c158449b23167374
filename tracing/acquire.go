package tracing

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leaseotel"
)

func (m *modeState) acquireSent(e history.Event) {
	a := m.agent(e.Agent)
	if at := a.attempt; at != nil {
		if at.id == e.RequestID {
			at.lastSent = e.At // a resend: RequestRetried came just before
			return
		}
		// The agent starts over without having given up (a scripted
		// agent acquiring again).
		m.settle(e.Agent, at, e.At, leaseotel.OutcomeNoReply, leaseotel.ErrorNoReply, "no reply: the requester gave up waiting")
	}
	a.spare = attempt{id: e.RequestID, resource: e.Resource, sent: e.At, lastSent: e.At,
		events: a.spare.events[:0], denials: a.spare.denials[:0]}
	a.attempt = &a.spare
}

func (m *modeState) acquired(e history.Event) {
	a := m.agent(e.Agent)
	at := a.attempt
	if at == nil || at.id != e.RequestID {
		// The harness reports Acquired only for the pending request; keep
		// going with what the event says.
		a.spare = attempt{id: e.RequestID, resource: e.Resource, sent: e.At, lastSent: e.At,
			events: a.spare.events[:0], denials: a.spare.denials} // refusals waiting on a lost attempt are this lease's
		at = &a.spare
	}
	a.attempt = nil
	id := m.read.Find(e.Incarnation, e.Resource, e.Fence)
	if id < 0 {
		// No grant of it in the history: no lease to trace it under.
		m.settle(e.Agent, at, e.At, leaseotel.OutcomeGranted, "", "")
		return
	}
	g := at.gen
	if g != nil && g.id != id {
		// The fence seen minted for this request is not the one granted
		// (a retry whose replay entry was evicted mints a second one).
		g.holderDone = true
		m.tryEnd(g)
		g = nil
	}
	if g == nil {
		g = m.generation(id, at.sent)
	}
	m.takeDenials(g, at)
	attrs := append(m.startAttrs(),
		leaseotel.LeaseRequestID.String(e.RequestID),
		leaseotel.LeaseOutcome.String(leaseotel.OutcomeGranted),
		leaseotel.LeaseBelievedFor.Int64((e.Deadline - e.At).Milliseconds()))
	if at.sent < e.At {
		sp := m.child(g, leaseotel.SpanLeaseAcquire, at.sent, optKindClient, attrs)
		m.replay(sp, at.events)
		sp.End(m.r.ts(e.At))
	} else {
		m.rootEvent(g, EventLeaseAcquire, e.At, attrs...)
		m.replay(g.root, at.events)
	}
	g.touch(e.At)
	g.holderDone = false
	if prev := a.holding; prev != nil && prev != g {
		// The agent now believes in the new lease only (an agent that
		// gives a lease up says so; one that never does, a scripted one,
		// moves on when it takes another).
		m.holderDone(a, prev)
	}
	a.holding = g
}

// holderDone records that the agent no longer acts under g. A renewal of
// g still in flight keeps its span: its reply may yet come.
func (m *modeState) holderDone(a *agentState, g *generation) {
	if a.holding == g {
		a.holding = nil
	}
	g.holderDone = true
	m.tryEnd(g)
}

// denied records a refused acquire on the "lease" span of the generation
// that caused it. That is the newest generation of the resource if the
// holder the coordinator names holds it; if instead that holder's own
// acquire is still waiting for its reply, the refusal waits on that
// acquire for the generation its reply starts. Only a refusal with no
// such lease behind it (a reason other than "held", or its trace already
// ended) becomes a "lease acquire" span of its own.
func (m *modeState) denied(e history.Event) {
	a := m.agent(e.Agent)
	at := a.attempt
	if at == nil {
		return
	}
	a.attempt = nil
	m.orphanDenials(at)
	d := deferredDenial{agent: e.Agent, resource: e.Resource, id: at.id, sent: at.sent, at: e.At, reason: e.Reason, retryAfter: e.Dur, holder: e.Other}
	if e.Other < 0 {
		m.deniedSpan(d, at.events)
		return
	}
	g := m.current(e.Resource)
	if g != nil && int(m.lease(g).Agent) == e.Other && !g.coordEnded {
		m.deny(g, d)
		return
	}
	if hat := m.agent(e.Other).attempt; hat != nil && hat.resource == e.Resource && e.Other != e.Agent {
		hat.denials = append(hat.denials, d)
		return
	}
	if g != nil && int(m.lease(g).Agent) == e.Other {
		m.deny(g, d)
		return
	}
	m.deniedSpan(d, at.events)
}

// deferredDenial is a refused acquire waiting for the trace of the lease
// that caused it.
type deferredDenial struct {
	agent      int // the requester
	resource   int
	id         string
	sent, at   time.Duration // the acquire's first send and its refusal's reply
	reason     leasefence.Reason
	retryAfter time.Duration
	holder     int // the holder the coordinator named, or -1
}

func (m *modeState) deny(g *generation, d deferredDenial) {
	g.touch(d.at)
	if g.denials == nil && len(m.spareDenials) > 0 {
		g.denials = m.spareDenials[len(m.spareDenials)-1]
		m.spareDenials = m.spareDenials[:len(m.spareDenials)-1]
	}
	for i := range g.denials {
		if x := &g.denials[i]; x.agent == d.agent && x.reason == d.reason {
			x.count++
			x.last = d.at
			return
		}
	}
	g.denials = append(g.denials, denialGroup{agent: d.agent, reason: d.reason, retryAfter: d.retryAfter, first: d.at, last: d.at, count: 1})
}

// takeDenials moves the refusals waiting on at to g, the generation at's
// reply started or the coordinator was seen to mint for it.
func (m *modeState) takeDenials(g *generation, at *attempt) {
	for _, d := range at.denials {
		m.deny(g, d)
	}
	at.denials = at.denials[:0]
}

// deniedSpan records a refusal as a root "lease acquire" span, with the
// wire events of its request (none for one that waited on another acquire).
func (m *modeState) deniedSpan(d deferredDenial, events []pendingEvent) {
	attrs := append(m.startAttrs(), leaseotel.LeaseReason.String(string(d.reason)), leaseotel.LeaseRetryAfter.Int64(d.retryAfter.Milliseconds()))
	if d.holder >= 0 {
		attrs = append(attrs, leaseotel.LeaseHeldBy.String(m.r.agent(d.holder)))
	}
	m.settle(d.agent, &attempt{id: d.id, resource: d.resource, sent: d.sent, events: events}, d.at, leaseotel.OutcomeDenied, "", "", attrs...)
}

// settle ends an acquire that brought its agent no lease: as a child of
// the generation the coordinator minted for it if one was seen, and as a
// root span of its own otherwise. A non-empty errType marks it failed.
// extra may be the scratch buffer. The caller has cleared the agent's
// attempt.
func (m *modeState) settle(agent int, at *attempt, end time.Duration, outcome, errType, errMsg string, extra ...attribute.KeyValue) {
	var attrs []attribute.KeyValue
	if len(extra) > 0 {
		attrs = extra // already in the scratch buffer
	} else {
		attrs = m.startAttrs()
	}
	attrs = append(attrs, leaseotel.LeaseRequestID.String(at.id), leaseotel.LeaseOutcome.String(outcome))
	if errType != "" {
		attrs = append(attrs, leaseotel.ErrorType.String(errType))
	}
	var sp trace.Span
	g := at.gen
	switch {
	case g != nil && at.sent >= end:
		// Answered at the instant it was sent: no span, an event.
		m.rootEvent(g, EventLeaseAcquire, end, attrs...)
		m.replay(g.root, at.events)
		m.takeDenials(g, at)
		g.holderDone = true
		m.tryEnd(g)
		return
	case g != nil:
		sp = m.child(g, leaseotel.SpanLeaseAcquire, at.sent, optKindClient, attrs)
	default:
		// A root of its own: it says what it is about.
		attrs = append(attrs, leaseotel.LeaseResource.String(m.r.resource(at.resource)), leaseotel.LeaseHolder.String(m.r.agent(agent)))
		attrs = append(attrs, m.rootAttrs...)
		tid := traceIDFrom(fold(m.base, traceAcquire, uint64(agent), hashString(at.id)))
		_, sp = m.start(m.slotCtx, tid, spanIDFor(tid, 0), leaseotel.SpanLeaseAcquire, at.sent, optKindClient, attrs)
	}
	m.replay(sp, at.events)
	if errType != "" {
		sp.SetStatus(codes.Error, errMsg)
	}
	sp.End(m.r.ts(end))
	if g != nil {
		m.takeDenials(g, at)
		g.touch(end)
		g.holderDone = true
		m.tryEnd(g)
		return
	}
	m.orphanDenials(at)
}

// orphanDenials records the refusals waiting on an acquire that started no
// lease as spans of their own: the coordinator named its agent as the
// holder, yet no lease of the agent is known to have been minted.
func (m *modeState) orphanDenials(at *attempt) {
	for _, d := range at.denials {
		m.deniedSpan(d, nil)
	}
	at.denials = at.denials[:0]
}

func (m *modeState) replay(sp trace.Span, events []pendingEvent) {
	for _, ev := range events {
		m.addEvent(sp, ev.name, ev.at)
	}
}

// fate records what happened to a message on the wire.
func (m *modeState) fate(e history.Event, name string) {
	a := m.agent(e.Agent)
	switch e.Request {
	case history.RequestAcquire:
		if at := a.attempt; at != nil && at.id == e.RequestID {
			at.events = append(at.events, pendingEvent{name, e.At})
		}
		return
	case history.RequestRenew:
		if q := a.renew; q != nil && !q.done && q.id == e.RequestID {
			m.requestFate(q, e, name)
		}
	case history.RequestRelease:
		if q := a.release; q != nil && !q.done {
			m.requestFate(q, e, name)
		}
	}
}

func (m *modeState) requestFate(q *request, e history.Event, name string) {
	m.addEvent(q.span, name, e.At)
	q.gen.touch(e.At)
	switch e.Kind {
	case history.RequestDuplicated:
		q.copies++
	case history.ReplyDropped:
		if q.kind == history.RequestRelease {
			// The coordinator answered, and reported its answer
			// (Released, ReleaseRefused) before the reply was lost.
			return
		}
		fallthrough
	case history.RequestDropped:
		q.copies--
		if q.copies == 0 {
			m.finish(q, e.At, leaseotel.OutcomeNoReply, leaseotel.ErrorNoReply, "no reply: every copy of the request or its reply was lost")
		}
	}
}

// finish ends a renewal or release. extra may be the scratch buffer.
func (m *modeState) finish(q *request, at time.Duration, outcome, errType, errMsg string, extra ...attribute.KeyValue) {
	q.done = true
	var attrs []attribute.KeyValue
	if len(extra) > 0 {
		attrs = extra
	} else {
		attrs = m.startAttrs()
	}
	attrs = append(attrs, leaseotel.LeaseOutcome.String(outcome))
	if errType != "" {
		attrs = append(attrs, leaseotel.ErrorType.String(errType))
	}
	q.span.SetAttributes(attrs...)
	m.keep(attrs)
	if errType != "" {
		q.span.SetStatus(codes.Error, errMsg)
	}
	q.span.End(m.r.ts(at))
	q.gen.touch(at)
}
