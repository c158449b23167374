package tracing

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/leasefence"
)

// SimRecorder records a simulated run as OpenTelemetry traces. It is a
// harness.Subscriber: pass it in harness.RunOptions.Subscribers (or to
// harness.NewLive), then call Close once the run is over.
//
// One trace per lease generation, identified by its resource, its fence and
// the coordinator incarnation that minted it (a coordinator restarted
// without persistence mints the same fences again). Its root span "lease"
// runs from the acquire's first send to the latest of the coordinator's end
// of the lease (expiry, release, restart) and the last thing its holder did
// under that fence. Its children are "lease acquire" (send to reply; lost,
// duplicated and retried messages are span events), each "lease renew" and
// "lease release", and each "fence commit". Instants (checks, stalls,
// expiry, pushes, partitions) are span events on the root. A refused commit
// has status Error, error.type stale_fence, and a link to the "lease" span
// of the generation that raised the floor. An acquire that got no lease
// (denied, or never answered) is a short root span "lease acquire" of its
// own. Root spans carry sim.mode (both modes are recorded), sim.scenario
// and sim.seed.
//
// Every timestamp is t0 plus the simulated instant. Ids are derived from the
// scenario's name and seed, the mode, t0 and the generation; they are used
// when the TracerProvider was built with NewIDGenerator.
//
// SimRecorder is safe for concurrent use: events of a paced run and Close
// may come from different goroutines. It never changes the run it records.
type SimRecorder struct {
	mu     sync.Mutex
	tracer trace.Tracer
	t0     time.Time
	run    runInfo
	modes  map[harness.Mode]*modeState
	closed bool

	agentNames, resourceNames []string // filled lazily: a name per span would allocate
}

// runInfo is what the recorder needs from the scenario.
type runInfo struct {
	scenario   string
	seed       uint64
	ttl        time.Duration
	retryAfter time.Duration
	scripted   map[int]bool // agents driven by the scenario's script: they never time out
}

// NewSimRecorder returns a recorder for runs of sc, with t0 the wall time
// the run's virtual instant 0 maps to (time.Now() when the run starts, so
// that a time-window search in a tracing backend finds it).
func NewSimRecorder(sc harness.Scenario, t0 time.Time, opts ...Option) *SimRecorder {
	c := newConfig(opts)
	r := &SimRecorder{
		tracer: c.tracer(),
		t0:     t0,
		run: runInfo{
			scenario: sc.Name, seed: sc.Seed, ttl: sc.TTL, retryAfter: sc.Network.RetryAfter,
			scripted: make(map[int]bool),
		},
		modes:         make(map[harness.Mode]*modeState, len(harness.Modes)),
		agentNames:    make([]string, max(sc.Agents, 0)),
		resourceNames: make([]string, max(sc.Resources, 0)),
	}
	for _, a := range sc.Script {
		if n, err := strconv.Atoi(strings.TrimPrefix(a.Agent, "agent-")); err == nil {
			r.run.scripted[n-1] = true
		}
	}
	return r
}

// ScenarioAttributes are the attributes that identify a run of sc:
// sim.scenario and sim.seed. Every root span a SimRecorder makes carries
// them; pass them in Config.Attributes to put them on the resource too.
func ScenarioAttributes(sc harness.Scenario) []attribute.KeyValue {
	return []attribute.KeyValue{SimScenario.String(sc.Name), SimSeed.String(strconv.FormatUint(sc.Seed, 10))}
}

// Event records one simulation event. Events of one mode must come in the
// order the simulation emits them (a harness.Subscriber's guarantee);
// events after Close are ignored.
func (r *SimRecorder) Event(e harness.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	m := r.modes[e.Mode]
	if m == nil {
		m = r.newMode(e.Mode)
		r.modes[e.Mode] = m
	}
	m.event(e)
}

// Close ends every span still open, so that every span started is ended
// and reaches the span processors: a lease still live ends at the last
// event seen in its mode, a request still waiting is marked unanswered.
// Call it once the run is over; it is idempotent. Exporting is the
// provider's job (Pipeline.Shutdown flushes).
func (r *SimRecorder) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	modes := make([]harness.Mode, 0, len(r.modes))
	for mode := range r.modes {
		modes = append(modes, mode)
	}
	slices.Sort(modes)
	for _, mode := range modes {
		r.modes[mode].close()
	}
}

func (r *SimRecorder) ts(at time.Duration) trace.SpanEventOption {
	return trace.WithTimestamp(r.t0.Add(at))
}

func (r *SimRecorder) agent(i int) string {
	if i < 0 || i >= len(r.agentNames) {
		return harness.AgentName(i)
	}
	if r.agentNames[i] == "" {
		r.agentNames[i] = harness.AgentName(i)
	}
	return r.agentNames[i]
}

func (r *SimRecorder) resource(i int) string {
	if i < 0 || i >= len(r.resourceNames) {
		return harness.ResourceName(i)
	}
	if r.resourceNames[i] == "" {
		r.resourceNames[i] = harness.ResourceName(i)
	}
	return r.resourceNames[i]
}

// giveUpAt is when an unscripted agent stops waiting for the reply to an
// acquire it last sent at lastSent: the harness resends after RetryAfter
// until its retries run out, and without retries waits 4 x the TTL.
func (r *SimRecorder) giveUpAt(agent int, lastSent time.Duration) (time.Duration, bool) {
	if r.run.scripted[agent] {
		return 0, false
	}
	wait := r.run.retryAfter
	if wait == 0 {
		wait = 4 * r.run.ttl
	}
	return lastSent + wait, true
}

// Kinds of trace, folded into trace ids so two kinds never share one.
const (
	traceLease uint64 = iota + 1
	traceAcquire
)

// modeState is the recorder's view of one mode's simulation.
type modeState struct {
	r         *SimRecorder
	base      uint64 // folded into every id of this mode
	epoch     int    // coordinator incarnation
	last      time.Duration
	agents    map[int]*agentState
	gens      map[genKey]*generation
	floors    map[int]floorRef // per resource
	rootAttrs []attribute.KeyValue
	slot      *idSlot         // the ids of the next span started
	slotCtx   context.Context // carries slot
}

func (r *SimRecorder) newMode(mode harness.Mode) *modeState {
	slot := &idSlot{}
	return &modeState{
		slot:    slot,
		slotCtx: withIDSlot(context.Background(), slot),
		r:       r,
		base:    fold(uint64(r.t0.UnixNano()), hashString(r.run.scenario), r.run.seed, hashString(string(mode))),
		// Agents are few per run in practice but may number 100,000: a map
		// holds only those that did something.
		agents: make(map[int]*agentState),
		gens:   make(map[genKey]*generation),
		floors: make(map[int]floorRef),
		rootAttrs: []attribute.KeyValue{
			SimScenario.String(r.run.scenario),
			SimSeed.String(strconv.FormatUint(r.run.seed, 10)),
			SimMode.String(string(mode)),
		},
	}
}

// genKey identifies a lease generation.
type genKey struct {
	epoch    int
	resource int
	fence    leasefence.Fence
}

func (k genKey) compare(o genKey) int {
	return cmp.Or(cmp.Compare(k.epoch, o.epoch), cmp.Compare(k.resource, o.resource), cmp.Compare(k.fence, o.fence))
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
	key        genKey
	agent      int
	traceID    trace.TraceID
	spans      uint64          // span ids handed out in this trace; the root is 0
	ctx        context.Context // carries the root span
	root       trace.Span
	coordEnded bool // the coordinator no longer has it: expired, released or forgotten
	coordEnd   time.Duration
	holderDone bool // its holder has moved on, or never learned of it
	last       time.Duration
	open       []*request
}

func (g *generation) touch(at time.Duration) { g.last = max(g.last, at) }

// request is a renewal or release in flight.
type request struct {
	span    trace.Span
	kind    leasefence.RequestKind
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
	gen      *generation // set if the coordinator is seen to have minted a fence for it before the reply
}

type pendingEvent struct {
	name string
	at   time.Duration
}

type agentState struct {
	attempt *attempt
	holding *generation // the lease the agent believes it holds
	renew   *request
	release *request
}

func (m *modeState) agent(i int) *agentState {
	a := m.agents[i]
	if a == nil {
		a = &agentState{}
		m.agents[i] = a
	}
	return a
}

func (m *modeState) event(e harness.Event) {
	m.last = max(m.last, e.At)
	if e.Agent < 0 {
		if e.Kind == harness.CoordinatorRestarted {
			m.restarted(e)
		}
		return // interventions are recorded through the events they cause
	}
	switch e.Kind {
	case harness.RequestSent:
		switch e.Request {
		case leasefence.KindAcquire:
			m.acquireSent(e)
		case leasefence.KindRenew:
			m.renewSent(e)
		case harness.KindRelease:
			m.releaseSent(e)
		}
	case harness.RequestDropped:
		m.fate(e, EventRequestDropped)
	case harness.ReplyDropped:
		m.fate(e, EventReplyDropped)
	case harness.RequestDuplicated:
		m.fate(e, EventRequestDuplicated)
	case harness.RequestRetried:
		m.fate(e, EventRequestRetried)
	case harness.Acquired:
		m.acquired(e)
	case harness.Denied:
		m.denied(e)
	case harness.Renewed, harness.RenewRefused:
		m.renewAnswered(e)
	case harness.Expired:
		g := m.coordinatorSide(e, e.At-m.r.run.ttl)
		g.root.AddEvent(EventExpired, m.r.ts(e.At))
		m.coordinatorEnded(g, e.At)
	case harness.Released:
		m.released(e)
	case harness.CheckPassed:
		m.holderInstant(e, EventCheckPassed)
	case harness.CheckFailed:
		name := EventCheckFailed
		if e.Reason == "write-skipped" {
			name = EventWriteSkipped
		}
		m.holderInstant(e, name)
	case harness.StallBegan:
		m.holderInstant(e, EventStallBegan, SimDuration.Int64(e.Dur.Milliseconds()))
	case harness.StallEnded:
		m.holderInstant(e, EventStallEnded)
	case harness.CommitAdmitted, harness.CommitRefused:
		m.commit(e)
	case harness.AdmitPushed:
		m.pushed(e)
	case harness.PushDropped:
		g := m.coordinatorSide(e, e.At)
		g.root.AddEvent(EventPushDropped, m.r.ts(e.At))
		g.touch(e.At)
	case harness.PartitionBegan, harness.PartitionEnded:
		// A partition concerns the agent, not a fence: it lands on the
		// lease the agent holds, if any.
		if g := m.agent(e.Agent).holding; g != nil {
			name := EventPartitionBegan
			if e.Kind == harness.PartitionEnded {
				name = EventPartitionEnded
			}
			g.root.AddEvent(name, m.r.ts(e.At))
			g.touch(e.At)
		}
	}
}

// holding returns the generation the event's agent acts under, if the
// event is about that lease.
func (m *modeState) holding(e harness.Event) *generation {
	g := m.agent(e.Agent).holding
	if g == nil || g.key.fence != e.Fence || g.key.resource != e.Resource {
		return nil
	}
	return g
}

func (m *modeState) holderInstant(e harness.Event, name string, attrs ...attribute.KeyValue) {
	g := m.holding(e)
	if g == nil {
		return // no lease behind it: a live stall of an idle agent, a skipped write
	}
	g.root.AddEvent(name, m.r.ts(e.At), trace.WithAttributes(attrs...))
	g.touch(e.At)
}

// --- spans ---

// leaseAttrs starts a span's attributes with the resource and holder, with
// room for more: a span's attributes are allocated once.
func (m *modeState) leaseAttrs(resource, agent, more int) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 2, 2+more)
	kv[0], kv[1] = LeaseResource.String(m.r.resource(resource)), LeaseHolder.String(m.r.agent(agent))
	return kv
}

// Options every span of a kind shares, made once.
var (
	optNewRoot      = trace.WithNewRoot()
	optKindClient   = trace.WithSpanKind(trace.SpanKindClient)
	optKindInternal = trace.WithSpanKind(trace.SpanKindInternal)
)

// start starts a span with the ids chosen for it. parent is g.ctx for a
// child and m.slotCtx for a root.
func (m *modeState) start(parent context.Context, tid trace.TraceID, sid trace.SpanID, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	m.slot.set(tid, sid)
	ctx, sp := m.r.tracer.Start(parent, name, opts...)
	*m.slot = idSlot{} // unused when the provider has another IDGenerator
	return ctx, sp
}

// generation returns the trace of key, starting its root span at start if
// it is new.
func (m *modeState) generation(key genKey, agent int, start time.Duration) *generation {
	if g := m.gens[key]; g != nil {
		return g
	}
	tid := traceIDFrom(fold(m.base, traceLease, uint64(key.epoch), uint64(key.resource), uint64(key.fence)))
	attrs := append(m.leaseAttrs(key.resource, agent, len(m.rootAttrs)+4), m.rootAttrs...)
	attrs = append(attrs,
		LeaseFence.Int64(int64(key.fence)),
		LeaseTTL.Int64(m.r.run.ttl.Milliseconds()),
		SimAgent.String(m.r.agent(agent)),
		SimEpoch.Int(key.epoch))
	ctx, root := m.start(m.slotCtx, tid, spanIDFor(tid, 0), SpanLease,
		optNewRoot, m.r.ts(start), optKindInternal, trace.WithAttributes(attrs...))
	g := &generation{key: key, agent: agent, traceID: tid, ctx: ctx, root: root, last: start}
	m.gens[key] = g
	return g
}

func (m *modeState) child(g *generation, name string, at time.Duration, kind trace.SpanStartOption, attrs []attribute.KeyValue, links ...trace.Link) trace.Span {
	g.spans++
	opts := []trace.SpanStartOption{m.r.ts(at), kind, trace.WithAttributes(attrs...)}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	_, sp := m.start(g.ctx, g.traceID, spanIDFor(g.traceID, g.spans), name, opts...)
	g.touch(at)
	return sp
}

// --- acquires ---

func (m *modeState) acquireSent(e harness.Event) {
	a := m.agent(e.Agent)
	if at := a.attempt; at != nil {
		if at.id == e.RequestID {
			at.lastSent = e.At // a resend: RequestRetried came just before
			return
		}
		// The agent gave up waiting and starts over.
		end := e.At
		if t, ok := m.r.giveUpAt(e.Agent, at.lastSent); ok {
			end = min(end, t)
		}
		m.settle(e.Agent, at, end, OutcomeNoReply, ErrorNoReply, "no reply: the requester gave up waiting")
	}
	if g := a.holding; g != nil {
		a.holding, a.renew = nil, nil
		g.holderDone = true
		m.tryEnd(g)
	}
	a.attempt = &attempt{id: e.RequestID, resource: e.Resource, sent: e.At, lastSent: e.At}
}

func (m *modeState) acquired(e harness.Event) {
	a := m.agent(e.Agent)
	at := a.attempt
	if at == nil || at.id != e.RequestID {
		// The harness reports Acquired only for the pending request; keep
		// going with what the event says.
		at = &attempt{id: e.RequestID, resource: e.Resource, sent: e.At, lastSent: e.At}
	}
	a.attempt = nil
	key := genKey{m.epoch, e.Resource, e.Fence}
	g := at.gen
	if g != nil && g.key != key {
		// The fence seen minted for this request is not the one granted
		// (a retry whose replay entry was evicted mints a second one).
		g.holderDone = true
		m.tryEnd(g)
		g = nil
	}
	if g == nil {
		g = m.generation(key, e.Agent, at.sent)
	}
	attrs := append(m.leaseAttrs(e.Resource, e.Agent, 5),
		LeaseRequestID.String(e.RequestID),
		LeaseFence.Int64(int64(e.Fence)),
		LeaseTTL.Int64(m.r.run.ttl.Milliseconds()),
		LeaseBelievedFor.Int64((e.Deadline - e.At).Milliseconds()),
		LeaseOutcome.String(OutcomeGranted))
	sp := m.child(g, SpanLeaseAcquire, at.sent, optKindClient, attrs)
	m.replay(sp, at.events)
	sp.End(m.r.ts(e.At))
	g.touch(e.At)
	g.holderDone = false
	a.holding = g
}

func (m *modeState) denied(e harness.Event) {
	at := m.agent(e.Agent).attempt
	if at == nil {
		return
	}
	attrs := []attribute.KeyValue{LeaseReason.String(string(e.Reason)), LeaseRetryAfter.Int64(e.Dur.Milliseconds())}
	if e.Other >= 0 {
		attrs = append(attrs, LeaseHeldBy.String(m.r.agent(e.Other)))
	}
	m.settle(e.Agent, at, e.At, OutcomeDenied, "", "", attrs...)
}

// settle ends an acquire that brought its agent no lease: as a child of
// the generation the coordinator minted for it if one was seen, and as a
// root span of its own otherwise. A non-empty errType marks it failed.
func (m *modeState) settle(agent int, at *attempt, end time.Duration, outcome, errType, errMsg string, extra ...attribute.KeyValue) {
	m.agent(agent).attempt = nil
	attrs := append(m.leaseAttrs(at.resource, agent, 4+len(extra)+len(m.rootAttrs)),
		LeaseRequestID.String(at.id), LeaseOutcome.String(outcome))
	attrs = append(attrs, extra...)
	if errType != "" {
		attrs = append(attrs, ErrorType.String(errType))
	}
	var sp trace.Span
	g := at.gen
	if g != nil {
		sp = m.child(g, SpanLeaseAcquire, at.sent, optKindClient, append(attrs, LeaseFence.Int64(int64(g.key.fence))))
	} else {
		tid := traceIDFrom(fold(m.base, traceAcquire, uint64(agent), hashString(at.id)))
		attrs = append(attrs, m.rootAttrs...)
		_, sp = m.start(m.slotCtx, tid, spanIDFor(tid, 0), SpanLeaseAcquire,
			optNewRoot, m.r.ts(at.sent), optKindClient, trace.WithAttributes(attrs...))
	}
	m.replay(sp, at.events)
	if errType != "" {
		sp.SetStatus(codes.Error, errMsg)
	}
	sp.End(m.r.ts(end))
	if g != nil {
		g.touch(end)
		g.holderDone = true
		m.tryEnd(g)
	}
}

func (m *modeState) replay(sp trace.Span, events []pendingEvent) {
	for _, ev := range events {
		sp.AddEvent(ev.name, m.r.ts(ev.at))
	}
}

// fate records what happened to a message on the wire.
func (m *modeState) fate(e harness.Event, name string) {
	a := m.agent(e.Agent)
	switch e.Request {
	case leasefence.KindAcquire:
		if at := a.attempt; at != nil && at.id == e.RequestID {
			at.events = append(at.events, pendingEvent{name, e.At})
		}
		return
	case leasefence.KindRenew:
		if q := a.renew; q != nil && !q.done && q.id == e.RequestID {
			m.requestFate(q, e, name)
		}
	case harness.KindRelease:
		if q := a.release; q != nil && !q.done {
			m.requestFate(q, e, name)
		}
	}
}

func (m *modeState) requestFate(q *request, e harness.Event, name string) {
	q.span.AddEvent(name, m.r.ts(e.At))
	q.gen.touch(e.At)
	switch e.Kind {
	case harness.RequestDuplicated:
		q.copies++
	case harness.ReplyDropped:
		if q.kind == harness.KindRelease {
			// The coordinator answered without a release (a release is
			// reported before its reply): it refused.
			m.finish(q, e.At, OutcomeRefused, "", "")
			return
		}
		fallthrough
	case harness.RequestDropped:
		q.copies--
		if q.copies == 0 {
			m.finish(q, e.At, OutcomeNoReply, ErrorNoReply, "no reply: every copy of the request or its reply was lost")
		}
	}
}

func (m *modeState) finish(q *request, at time.Duration, outcome, errType, errMsg string, extra ...attribute.KeyValue) {
	q.done = true
	q.span.SetAttributes(LeaseOutcome.String(outcome))
	q.span.SetAttributes(extra...)
	if errType != "" {
		q.span.SetAttributes(ErrorType.String(errType))
		q.span.SetStatus(codes.Error, errMsg)
	}
	q.span.End(m.r.ts(at))
	q.gen.touch(at)
}

// --- renewals and releases ---

func (m *modeState) renewSent(e harness.Event) {
	g := m.holding(e)
	if g == nil {
		return
	}
	attrs := append(m.leaseAttrs(e.Resource, e.Agent, 2), LeaseFence.Int64(int64(e.Fence)), LeaseRequestID.String(e.RequestID))
	q := &request{kind: leasefence.KindRenew, id: e.RequestID, gen: g, copies: 1}
	q.span = m.child(g, SpanLeaseRenew, e.At, optKindClient, attrs)
	g.open = append(g.open, q)
	m.agent(e.Agent).renew = q
}

func (m *modeState) renewAnswered(e harness.Event) {
	q := m.agent(e.Agent).renew
	if q == nil || q.done {
		return
	}
	if e.Kind == harness.Renewed {
		if q.id == e.RequestID {
			m.finish(q, e.At, OutcomeRenewed, "", "", LeaseTTL.Int64(m.r.run.ttl.Milliseconds()),
				LeaseBelievedFor.Int64((e.Deadline - e.At).Milliseconds()))
		}
		return
	}
	m.finish(q, e.At, OutcomeRefused, ErrorLeaseLost, fmt.Sprintf("renewal refused: %s", e.Reason),
		LeaseReason.String(string(e.Reason)))
}

func (m *modeState) releaseSent(e harness.Event) {
	g := m.holding(e)
	if g == nil {
		g = m.gens[genKey{m.epoch, e.Resource, e.Fence}]
	}
	if g == nil {
		return
	}
	attrs := append(m.leaseAttrs(e.Resource, e.Agent, 1), LeaseFence.Int64(int64(e.Fence)))
	q := &request{kind: harness.KindRelease, gen: g, copies: 1, arrives: e.At + e.Dur}
	q.span = m.child(g, SpanLeaseRelease, e.At, optKindClient, attrs)
	g.open = append(g.open, q)
	m.agent(e.Agent).release = q
}

func (m *modeState) released(e harness.Event) {
	g := m.gens[genKey{m.epoch, e.Resource, e.Fence}]
	if g == nil {
		return
	}
	for _, q := range g.open {
		if q.kind == harness.KindRelease && !q.done {
			m.finish(q, e.At, OutcomeReleased, "", "")
		}
	}
	g.root.AddEvent(EventReleased, m.r.ts(e.At))
	m.coordinatorEnded(g, e.At)
}

// --- the coordinator's side ---

// coordinatorSide returns the generation a coordinator-side event is about.
// The coordinator can be seen to mint a fence before its holder hears of it
// (a push, an expiry before a slow or lost reply): then the generation
// starts at the pending acquire's send, or at start if there is none.
func (m *modeState) coordinatorSide(e harness.Event, start time.Duration) *generation {
	key := genKey{m.epoch, e.Resource, e.Fence}
	if g := m.gens[key]; g != nil {
		return g
	}
	if at := m.agent(e.Agent).attempt; at != nil && at.resource == e.Resource && at.gen == nil {
		at.gen = m.generation(key, e.Agent, at.sent)
		return at.gen
	}
	g := m.generation(key, e.Agent, max(start, 0))
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

func (m *modeState) pushed(e harness.Event) {
	g := m.coordinatorSide(e, e.At)
	raised := e.Reason == "" && e.OtherFence == e.Fence
	outcome := OutcomeRaised
	if !raised {
		outcome = OutcomeBelowFloor
	}
	attrs := []attribute.KeyValue{FenceFloor.Int64(int64(e.OtherFence)), FenceOutcome.String(outcome)}
	if e.Other >= 0 {
		attrs = append(attrs, FenceFloorHolder.String(m.r.agent(e.Other)))
	}
	g.root.AddEvent(EventAdmitPushed, m.r.ts(e.At), trace.WithAttributes(attrs...))
	g.touch(e.At)
	if raised {
		m.floors[e.Resource] = floorRef{fence: e.Fence, agent: e.Agent, span: g.root.SpanContext()}
	}
}

func (m *modeState) restarted(e harness.Event) {
	for _, g := range m.sortedGens() {
		if g.key.epoch == m.epoch && !g.coordEnded {
			g.root.AddEvent(EventRestarted, m.r.ts(e.At), trace.WithAttributes(LeaseReason.String(string(e.Reason))))
			m.coordinatorEnded(g, e.At)
		}
	}
	m.epoch++
}

// --- writes ---

func (m *modeState) commit(e harness.Event) {
	g := m.holding(e)
	if g == nil {
		return
	}
	refused := e.Kind == harness.CommitRefused
	stale := !refused && e.Reason == "stale"
	attrs := append(m.leaseAttrs(e.Resource, e.Agent, 5), LeaseFence.Int64(int64(e.Fence)))
	var links []trace.Link
	outcome := OutcomeAdmitted
	if refused || stale {
		outcome = OutcomeRefused
		if stale {
			outcome = OutcomeStale
		}
		attrs = append(attrs, FenceFloor.Int64(int64(e.OtherFence)))
		if e.Other >= 0 {
			attrs = append(attrs, FenceFloorHolder.String(m.r.agent(e.Other)))
		}
		if f, ok := m.floors[e.Resource]; ok && f.fence == e.OtherFence && f.agent == e.Other && f.span.IsValid() {
			links = append(links, trace.Link{SpanContext: f.span, Attributes: []attribute.KeyValue{
				LeaseHolder.String(m.r.agent(f.agent)), LeaseFence.Int64(int64(f.fence)),
			}})
		}
	}
	attrs = append(attrs, FenceOutcome.String(outcome))
	sp := m.child(g, SpanFenceCommit, e.At, optKindInternal, attrs, links...)
	if refused {
		rej := leasefence.Rejection{Resource: m.r.resource(e.Resource), Holder: m.r.agent(e.Agent), Fence: e.Fence,
			FloorHolder: m.r.agent(e.Other), FloorFence: e.OtherFence}
		var err error = &leasefence.StaleFenceError{Rejection: rej}
		errType := ErrorStaleFence
		if e.OtherFence == e.Fence {
			errType = ErrorTokenConflict
			err = fmt.Errorf("%w: fence %d at %q belongs to %s", leasefence.ErrTokenConflict, e.Fence, rej.Resource, rej.FloorHolder)
		}
		sp.RecordError(err, m.r.ts(e.At))
		sp.SetAttributes(ErrorType.String(errType))
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(m.r.ts(e.At))
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
		case q.kind == harness.KindRelease && g.coordEnded:
			// The lease had ended at the coordinator before this release
			// could free it: the release is refused when it arrives.
			m.finish(q, max(q.arrives, g.coordEnd), OutcomeRefused, "", "")
		default:
			m.finish(q, at, OutcomeUnanswered, "", "")
		}
	}
	g.root.End(m.r.ts(max(at, g.last)))
	delete(m.gens, g.key)
	if a := m.agents[g.agent]; a != nil && a.holding == g {
		a.holding, a.renew = nil, nil
	}
}

func (m *modeState) sortedGens() []*generation {
	gens := make([]*generation, 0, len(m.gens))
	for _, g := range m.gens {
		gens = append(gens, g)
	}
	slices.SortFunc(gens, func(a, b *generation) int { return a.key.compare(b.key) })
	return gens
}

func (m *modeState) close() {
	agents := make([]int, 0, len(m.agents))
	for i, a := range m.agents {
		if a.attempt != nil {
			agents = append(agents, i)
		}
	}
	slices.Sort(agents)
	for _, i := range agents {
		m.settle(i, m.agents[i].attempt, m.last, OutcomeUnanswered, "", "")
	}
	for _, g := range m.sortedGens() {
		end := m.last
		if g.coordEnded {
			end = max(g.coordEnd, g.last)
		}
		m.end(g, end)
	}
}
