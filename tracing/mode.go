package tracing

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leaseotel"
)

// Kinds of trace, folded into trace ids so two kinds never share one.
const (
	traceLease uint64 = iota + 1
	traceAcquire
)

// modeState is the recorder's view of one mode's simulation. Agents and
// resources are looked up by index in slices: names are fixed for a run,
// and a map lookup per event would cost more than the rest of the event.
type modeState struct {
	r      *Recorder
	read   *history.Reader // the history so far: what each write landed under
	base   uint64          // folded into every id of this mode
	last   time.Duration
	agents []*agentState // by agent; nil until the agent does something
	// traces are the traces of the Reader's generations, by its index:
	// the open trace of a generation, or nil. What a generation is (its
	// holder, resource, fence, incarnation) is the Reader's to say.
	traces    []*generation
	floors    []floorRef // by resource
	rootAttrs []attribute.KeyValue
	slot      *idSlot         // the ids of the next span started
	slotCtx   context.Context // carries slot

	// Buffers reused for every span and event: the trace API copies the
	// attributes and options it is given (NewSpanStartConfig,
	// NewEventConfig), and so does the SDK's SetAttributes, so a slice per
	// call would only feed the garbage collector.
	attrs        []attribute.KeyValue
	opts         []trace.SpanStartOption
	evOpts       []trace.EventOption
	spareDenials [][]denialGroup // of ended generations
}

func (r *Recorder) newMode(mode history.Mode) *modeState {
	slot := &idSlot{}
	m := &modeState{
		slot:    slot,
		slotCtx: withIDSlot(context.Background(), slot),
		r:       r,
		read:    history.NewReader(&r.run.header),
		base:    fold(r.runID(), hashString(string(mode))),
		agents:  make([]*agentState, len(r.run.header.Agents)),
		floors:  make([]floorRef, len(r.run.header.Resources)),
		rootAttrs: []attribute.KeyValue{
			SimScenario.String(r.run.scenario),
			SimSeed.String(strconv.FormatUint(r.run.seed, 10)),
			SimMode.String(string(mode)),
		},
	}
	if c := r.run.header.Contender(mode); c.Library != "" && c.Library != history.LabLibrary {
		m.rootAttrs = append(m.rootAttrs, SimContenderLibrary.String(c.Library), SimContenderVersion.String(c.Version),
			SimDiscipline.String(string(c.Discipline)))
	}
	return m
}

// lease is the Reader's generation g traces.
func (m *modeState) lease(g *generation) *history.Generation { return m.read.Generation(g.id) }

// compare orders traces by incarnation, resource and fence.
func (m *modeState) compare(a, b *generation) int {
	x, y := m.lease(a), m.lease(b)
	return cmp.Or(cmp.Compare(x.Incarnation, y.Incarnation), cmp.Compare(x.Resource, y.Resource), cmp.Compare(x.Fence, y.Fence))
}

// traceOf returns the open trace of the generation an event names (its
// incarnation, resource and fence), or nil.
func (m *modeState) traceOf(e *history.Event) *generation {
	if id := m.read.Find(e.Incarnation, e.Resource, e.Fence); id >= 0 && int(id) < len(m.traces) {
		return m.traces[id]
	}
	return nil
}

// current returns the open trace of the newest generation of resource, if
// the incarnation in force minted it: the lease a denial lands on.
func (m *modeState) current(resource int) *generation {
	id := m.read.Latest(resource)
	if id < 0 || int(id) >= len(m.traces) || m.read.Generation(id).Incarnation != m.read.Incarnation() {
		return nil
	}
	return m.traces[id]
}

// floorRef is the generation whose write (or pushed fence) a resource's
// floor is at: in fenced mode the gate's floor, in naive mode the highest
// fence that landed. A stale write links to it.
type floorRef struct {
	fence leasefence.Fence
	agent int
	span  trace.SpanContext
}

// generation is one lease generation's trace.
type generation struct {
	id         int32 // the Reader's generation
	traceID    trace.TraceID
	spans      uint64          // span ids handed out in this trace; the root is 0
	ctx        context.Context // carries the root span
	root       trace.Span
	coordEnded bool // the coordinator no longer has it: expired, released or forgotten
	coordEnd   time.Duration
	holderDone bool // its holder has moved on, or never learned of it
	last       time.Duration
	open       []*request
	denials    []denialGroup // acquires refused because of this lease, one entry per requester and reason
}

func (g *generation) touch(at time.Duration) { g.last = max(g.last, at) }

// denialGroup is the acquires of one requester refused, for one reason,
// because of a generation: they become one span event on its "lease" span
// when it ends, so an agent that retries all through a long lease adds one
// event, not one per retry.
type denialGroup struct {
	agent       int
	reason      leasefence.Reason
	retryAfter  time.Duration // the first refusal's hint
	first, last time.Duration
	count       int
}

// request is a renewal or release in flight.
type request struct {
	span    trace.Span
	kind    history.Request
	id      string
	gen     *generation
	copies  int           // copies of it still in flight (duplicates add one, drops take one)
	arrives time.Duration // release: when it reaches the coordinator
	done    bool
}

// attempt is an acquire waiting for its reply. Its fence, and so its
// trace, is unknown until the reply, so what happens to it is buffered.
type attempt struct {
	id       string
	resource int
	sent     time.Duration // first send
	lastSent time.Duration
	events   []pendingEvent
	denials  []deferredDenial // refusals of others' acquires because of the lease this one was granted
	gen      *generation      // set if the coordinator is seen to have minted a fence for it before the reply
}

type pendingEvent struct {
	name string
	at   time.Duration
}

type agentState struct {
	attempt *attempt // the acquire in flight, or nil; points to spare
	spare   attempt  // reused by every acquire of the agent
	holding *generation
	// checkedUnder is the generation of the agent's last passed validity
	// check, at checkedAt: where its next write began.
	checkedUnder *generation
	checkedAt    time.Duration
	renew        *request
	release      *request
}

func (m *modeState) agent(i int) *agentState {
	if i >= len(m.agents) {
		m.agents = slices.Grow(m.agents, i+1-len(m.agents))[:i+1]
	}
	a := m.agents[i]
	if a == nil {
		a = &agentState{}
		m.agents[i] = a
	}
	return a
}

func (m *modeState) event(e history.Event) {
	if m.read.Add(&e) != nil {
		return // not a history event: it names no one its kind names, or one not in the header
	}
	m.last = max(m.last, e.At)
	if e.Kind.IsFault() {
		m.fault(e)
		return
	}
	if e.Agent < 0 {
		if e.Kind == history.CoordinatorRestarted {
			m.restarted(e)
		}
		return // interventions are recorded through the events they cause
	}
	switch e.Kind {
	case history.RequestSent:
		switch e.Request {
		case history.RequestAcquire:
			m.acquireSent(e)
		case history.RequestRenew:
			m.renewSent(e)
		case history.RequestRelease:
			m.releaseSent(e)
		}
	case history.RequestDropped:
		m.fate(e, EventRequestDropped)
	case history.ReplyDropped:
		m.fate(e, EventReplyDropped)
	case history.RequestDuplicated:
		m.fate(e, EventRequestDuplicated)
	case history.RequestRetried:
		m.fate(e, EventRequestRetried)
	case history.LeaseAbandoned:
		if g := m.holding(e); g != nil {
			m.holderDone(m.agent(e.Agent), g)
		}
	case history.AcquireAbandoned:
		if at := m.agent(e.Agent).attempt; at != nil && at.id == e.RequestID {
			m.agent(e.Agent).attempt = nil
			m.settle(e.Agent, at, e.At, leaseotel.OutcomeNoReply, leaseotel.ErrorNoReply, "no reply: the requester gave up waiting")
		}
	case history.Acquired:
		m.acquired(e)
	case history.Denied:
		m.denied(e)
	case history.Renewed, history.RenewRefused:
		m.renewAnswered(e)
	case history.Expired:
		if g := m.coordinatorSide(e, e.At-m.r.run.ttl); g != nil {
			m.rootEvent(g, EventExpired, e.At)
			m.coordinatorEnded(g, e.At)
		}
	case history.Released:
		m.released(e)
	case history.ReleaseRefused:
		m.releaseRefused(e)
	case history.CheckPassed:
		if g := m.holding(e); g != nil {
			m.rootEvent(g, EventCheckPassed, e.At)
			a := m.agent(e.Agent)
			a.checkedUnder, a.checkedAt = g, e.At
		}
	case history.CheckFailed:
		m.agent(e.Agent).checkedUnder = nil
		m.holderInstant(e, EventCheckFailed)
	case history.WriteSkipped:
		m.holderInstant(e, EventWriteSkipped)
	case history.StallBegan:
		if g := m.holding(e); g != nil {
			m.rootEvent(g, EventStallBegan, e.At, append(m.startAttrs(), SimDuration.Int64(e.Dur.Milliseconds()))...)
		}
	case history.StallEnded:
		m.holderInstant(e, EventStallEnded)
	case history.CommitAdmitted, history.CommitRefused, history.WriteLanded:
		m.commit(e)
	case history.WriteFailed:
		if g := m.holding(e); g != nil {
			m.rootEvent(g, EventWriteFailed, e.At, append(m.startAttrs(), leaseotel.ErrorMessage.String(e.Detail))...)
		}
	case history.AdmitPushed:
		m.pushed(e)
	case history.PushDropped:
		if g := m.coordinatorSide(e, e.At); g != nil {
			m.rootEvent(g, EventPushDropped, e.At)
		}
	}
}

// fault records a fault's beginning or end, whatever its kind: a fault of
// an agent concerns it, not a fence, and lands on the lease it holds, if
// any; a fault of no agent lands on every lease the coordinator has not
// let go.
func (m *modeState) fault(e history.Event) {
	name := EventFaultBegan
	if e.Kind == history.FaultEnded {
		name = EventFaultEnded
	}
	attrs := []attribute.KeyValue{SimFault.String(e.Fault), SimFaultTarget.String(m.r.run.header.Target(&e))}
	if e.Agent >= 0 {
		if g := m.agent(e.Agent).holding; g != nil {
			m.rootEvent(g, name, e.At, attrs...)
		}
		return
	}
	for _, g := range m.sortedGens() {
		if !g.coordEnded {
			m.rootEvent(g, name, e.At, attrs...)
		}
	}
}

// holding returns the generation the event's agent acts under, if the
// event is about that lease.
func (m *modeState) holding(e history.Event) *generation {
	g := m.agent(e.Agent).holding
	if g == nil {
		return nil
	}
	if l := m.lease(g); l.Fence != e.Fence || int(l.Resource) != e.Resource {
		return nil
	}
	return g
}

// holderInstant records an instant of a holder on its lease's span. One
// with no lease behind it (a stall of an idle agent in a paced run, a
// skipped write) is not recorded.
func (m *modeState) holderInstant(e history.Event, name string) {
	if g := m.holding(e); g != nil {
		m.rootEvent(g, name, e.At)
	}
}

// --- spans and events ---

// Options every span of a kind shares, made once.
var (
	optKindClient   = trace.WithSpanKind(trace.SpanKindClient)
	optKindInternal = trace.WithSpanKind(trace.SpanKindInternal)
)

// startAttrs returns the scratch buffer, emptied, for the attributes of
// the next span or event.
func (m *modeState) startAttrs() []attribute.KeyValue { return m.attrs[:0] }

// keep makes attrs, which grew from startAttrs, the scratch buffer if
// appending to it reallocated.
func (m *modeState) keep(attrs []attribute.KeyValue) {
	if cap(attrs) > cap(m.attrs) {
		m.attrs = attrs[:0]
	}
}

// start starts a span with the ids chosen for it. parent is g.ctx for a
// child and m.slotCtx for a root: slotCtx carries no span, so a span
// started from it is a root without trace.WithNewRoot, which would cost a
// context and a span value per root.
func (m *modeState) start(parent context.Context, tid trace.TraceID, sid trace.SpanID, name string, at time.Duration,
	kind trace.SpanStartOption, attrs []attribute.KeyValue, links ...trace.Link) (context.Context, trace.Span) {
	m.opts = append(m.opts[:0], m.r.ts(at), kind)
	if len(attrs) > 0 {
		m.opts = append(m.opts, trace.WithAttributes(attrs...))
		m.keep(attrs)
	}
	if len(links) > 0 {
		m.opts = append(m.opts, trace.WithLinks(links...))
	}
	m.slot.set(tid, sid)
	ctx, sp := m.r.tracer.Start(parent, name, m.opts...)
	*m.slot = idSlot{} // unused when the provider has another IDGenerator
	return ctx, sp
}

// generation returns the trace of the Reader's generation id, starting its
// root span at start if it is new.
func (m *modeState) generation(id int32, start time.Duration) *generation {
	if int(id) >= len(m.traces) {
		m.traces = slices.Grow(m.traces, int(id)+1-len(m.traces))[:id+1]
	}
	if g := m.traces[id]; g != nil {
		return g
	}
	l := m.read.Generation(id)
	tid := traceIDFrom(fold(m.base, traceLease, uint64(l.Incarnation), uint64(l.Resource), uint64(l.Fence)))
	holder := m.r.agent(int(l.Agent))
	attrs := append(m.startAttrs(),
		leaseotel.LeaseResource.String(m.r.resource(int(l.Resource))),
		leaseotel.LeaseHolder.String(holder),
		leaseotel.LeaseFence.Int64(int64(l.Fence)),
		leaseotel.LeaseTTL.Int64(m.r.run.ttl.Milliseconds()),
		SimAgent.String(holder),
		SimEpoch.Int(int(l.Incarnation)))
	attrs = append(attrs, m.rootAttrs...)
	ctx, root := m.start(m.slotCtx, tid, spanIDFor(tid, 0), leaseotel.SpanLease, start, optKindInternal, attrs)
	g := &generation{id: id, traceID: tid, ctx: ctx, root: root, last: start}
	m.traces[id] = g
	return g
}

// child starts a span under g's root. The root carries the resource, the
// holder and the fence, so a child's attributes are only what is its own.
// They are set once the span is started, not passed to Start: a sampler
// decides for the whole trace at its root (the SDK's default is
// ParentBased), and the start option would copy them once more.
func (m *modeState) child(g *generation, name string, at time.Duration, kind trace.SpanStartOption, attrs []attribute.KeyValue, links ...trace.Link) trace.Span {
	g.spans++
	_, sp := m.start(g.ctx, g.traceID, spanIDFor(g.traceID, g.spans), name, at, kind, nil, links...)
	if len(attrs) > 0 {
		sp.SetAttributes(attrs...)
		m.keep(attrs)
	}
	g.touch(at)
	return sp
}

// rootEvent adds a span event to g's "lease" span.
func (m *modeState) rootEvent(g *generation, name string, at time.Duration, attrs ...attribute.KeyValue) {
	m.addEvent(g.root, name, at, attrs...)
	g.touch(at)
}

func (m *modeState) addEvent(sp trace.Span, name string, at time.Duration, attrs ...attribute.KeyValue) {
	m.evOpts = append(m.evOpts[:0], m.r.ts(at))
	if len(attrs) > 0 {
		m.evOpts = append(m.evOpts, trace.WithAttributes(attrs...))
		m.keep(attrs)
	}
	sp.AddEvent(name, m.evOpts...)
}
