package tracing

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
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
// under that fence, and carries what the whole trace is about: resource,
// holder, fence, TTL, coordinator incarnation, sim.mode (both modes are
// recorded), sim.scenario and sim.seed. Its children carry only what is
// their own: "lease acquire" (send to reply; lost, duplicated and retried
// messages are span events), each "lease renew" and "lease release", and
// each "fence commit" (from the holder's validity check to the gate's
// answer, the window a stall stretches). Instants (checks, stalls, expiry,
// pushes, partitions) are span events on the root, and so is an acquire
// answered at the instant it was sent or a write made at the instant of
// its check (EventLeaseAcquire, EventFenceCommit, with the span's
// attributes): a span of no length is one a backend has to repair, and a
// write recorded as an event has no link and no status. A refused commit has status
// Error, error.type stale_fence, and a link to the "lease" span of the
// generation that raised the floor.
//
// An acquire refused because a lease was held is not a lease generation:
// it is an "acquire denied" event on the "lease" span of the holder the
// coordinator named, one per requester (LeaseDenials counts its refusals),
// so a holder's trace shows who queued behind it. Its request's lost or
// retried messages are not recorded. Only an acquire that got no lease and
// has no such lease in view (never answered, or refused with its holder's
// trace already ended) is a short root span "lease acquire" of its own.
//
// Every timestamp is t0 plus the simulated instant. Ids are derived from the
// scenario's name and seed, the mode, t0 and the generation; they are used
// when the TracerProvider was built with NewIDGenerator.
//
// The OpenTelemetry work is done on a goroutine of the recorder, not on
// the simulation's: Event only queues the event (the run waits only when
// the recorder is thousands of events behind), so with a second core the
// spans are made while the run goes on. Close returns once every queued
// event is recorded. A paced run's events are handed over within 50ms, so
// its spans appear as it runs.
//
// SimRecorder is safe for concurrent use: events of a paced run and Close
// may come from different goroutines. It never changes the run it records.
type SimRecorder struct {
	mu      sync.Mutex
	batch   []history.Event // events not yet handed to the recording goroutine
	queue   chan []history.Event
	free    chan []history.Event // emptied batches, for reuse
	flush   *time.Timer          // hands over a batch that is not full
	started bool                 // the recording goroutine runs
	closed  bool
	done    chan struct{} // closed when every queued event is recorded and every span ended

	// Owned by the recording goroutine.
	tracer trace.Tracer
	t0     time.Time
	run    runInfo
	modes  map[harness.Mode]*modeState
	lastAt time.Duration
	lastTS trace.SpanEventOption
	// stoppedAt is when the run stopped, as CloseAt was told; what is
	// still open then ends there (or at a mode's last event, if later).
	stoppedAt time.Duration

	agentNames, resourceNames []string // filled lazily: a name per span would allocate
}

// Queueing: events go to the recording goroutine in batches, so that
// handing one over costs a channel operation per batchSize events. At most
// queueBatches batches wait; beyond that the run waits for the recorder,
// which bounds the memory a fast run can queue.
const (
	batchSize    = 256
	queueBatches = 8
	flushEvery   = 50 * time.Millisecond
)

// runInfo is what the recorder needs from the scenario.
type runInfo struct {
	scenario string
	seed     uint64
	ttl      time.Duration
	header   history.Header // the participants, for each mode's history.Reader
}

// NewSimRecorder returns a recorder for runs of sc, with t0 the wall time
// the run's virtual instant 0 maps to (time.Now() when the run starts, so
// that a time-window search in a tracing backend finds it).
func NewSimRecorder(sc spec.Scenario, t0 time.Time, opts ...Option) *SimRecorder {
	c := newConfig(opts)
	r := &SimRecorder{
		tracer: c.tracer(),
		t0:     t0,
		run: runInfo{
			scenario: sc.Name, seed: sc.Seed, ttl: sc.TTL, header: sc.Header(harness.Modes),
		},
		modes:         make(map[harness.Mode]*modeState, len(harness.Modes)),
		queue:         make(chan []history.Event, queueBatches),
		free:          make(chan []history.Event, queueBatches+1),
		done:          make(chan struct{}),
		agentNames:    make([]string, max(sc.Agents, 0)),
		resourceNames: make([]string, max(sc.Resources, 0)),
	}
	return r
}

// ScenarioAttributes are the attributes that identify a run of sc:
// sim.scenario and sim.seed. Every root span a SimRecorder makes carries
// them; pass them in Config.Attributes to put them on the resource too.
func ScenarioAttributes(sc spec.Scenario) []attribute.KeyValue {
	return []attribute.KeyValue{SimScenario.String(sc.Name), SimSeed.String(strconv.FormatUint(sc.Seed, 10))}
}

// Event records one simulation event. Events of one mode must come in the
// order the simulation emits them (a harness.Subscriber's guarantee);
// events after Close are ignored.
func (r *SimRecorder) Event(e history.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.batch == nil {
		select {
		case r.batch = <-r.free:
		default:
			r.batch = make([]history.Event, 0, batchSize)
		}
	}
	r.batch = append(r.batch, e)
	switch {
	case len(r.batch) >= batchSize:
		r.handOver()
	case len(r.batch) == 1:
		if r.flush == nil {
			r.flush = time.AfterFunc(flushEvery, r.flushBatch)
		} else {
			r.flush.Reset(flushEvery)
		}
	}
}

// handOver queues the batch for the recording goroutine, starting it the
// first time. The caller holds r.mu.
func (r *SimRecorder) handOver() {
	if len(r.batch) == 0 {
		return
	}
	if !r.started {
		r.started = true
		go r.record()
	}
	r.queue <- r.batch
	r.batch = nil
}

// flushBatch hands over the events of a paced run that came slower than a
// batch fills.
func (r *SimRecorder) flushBatch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.handOver()
	}
}

// record is the recording goroutine: it makes the spans of every queued
// event, in order, and once Close has closed the queue, ends the spans
// still open.
func (r *SimRecorder) record() {
	defer close(r.done)
	for batch := range r.queue {
		for i := range batch {
			e := &batch[i]
			m := r.modes[e.Mode]
			if m == nil {
				m = r.newMode(e.Mode)
				r.modes[e.Mode] = m
			}
			m.event(*e)
		}
		clear(batch) // the strings of a recorded event need not stay alive
		select {
		case r.free <- batch[:0]:
		default:
		}
	}
	modes := make([]harness.Mode, 0, len(r.modes))
	for mode := range r.modes {
		modes = append(modes, mode)
	}
	slices.Sort(modes)
	for _, mode := range modes {
		r.modes[mode].close(r.stoppedAt)
	}
}

// Close records every event queued, then ends every span still open, so
// that every span started is ended and reaches the span processors: a
// lease still live ends at the last event seen in its mode, a request
// still waiting is marked unanswered. Call it once the run is over; it
// returns once that is done, and later calls return at once. Exporting is
// the provider's job (otelexport's Pipeline.Shutdown flushes).
func (r *SimRecorder) Close() { r.CloseAt(0) }

// CloseAt is Close for a run known to have stopped at the virtual instant
// stopped (its Duration if it ran to its end): a lease still live, or a
// request still waiting for its reply, then lasts until the run stopped,
// not only until the last thing that happened, so that a request sent at
// the last event is not a span of no length.
func (r *SimRecorder) CloseAt(stopped time.Duration) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return
	}
	r.closed = true
	r.stoppedAt = stopped // read by the recording goroutine only after the queue closes
	if r.flush != nil {
		r.flush.Stop()
	}
	r.handOver()
	if !r.started {
		r.started = true
		go r.record()
	}
	close(r.queue)
	r.mu.Unlock()
	<-r.done
}

// ts is the timestamp option of a simulated instant. Many things happen at
// one instant (a commit's start and end, a check and the stall after it),
// so the last one made is reused: each costs an allocation.
func (r *SimRecorder) ts(at time.Duration) trace.SpanEventOption {
	if r.lastTS == nil || r.lastAt != at {
		r.lastAt, r.lastTS = at, trace.WithTimestamp(r.t0.Add(at))
	}
	return r.lastTS
}

func (r *SimRecorder) agent(i int) string {
	if i < 0 || i >= len(r.agentNames) {
		return spec.AgentName(i)
	}
	if r.agentNames[i] == "" {
		r.agentNames[i] = spec.AgentName(i)
	}
	return r.agentNames[i]
}

func (r *SimRecorder) resource(i int) string {
	if i < 0 || i >= len(r.resourceNames) {
		return spec.ResourceName(i)
	}
	if r.resourceNames[i] == "" {
		r.resourceNames[i] = spec.ResourceName(i)
	}
	return r.resourceNames[i]
}

// Kinds of trace, folded into trace ids so two kinds never share one.
const (
	traceLease uint64 = iota + 1
	traceAcquire
)

// modeState is the recorder's view of one mode's simulation. Agents and
// resources are looked up by index in slices: names are fixed for a run,
// and a map lookup per event would cost more than the rest of the event.
type modeState struct {
	r         *SimRecorder
	read      *history.Reader // the history so far: what each write landed under
	base      uint64          // folded into every id of this mode
	epoch     int             // coordinator incarnation
	last      time.Duration
	agents    []*agentState // by agent; nil until the agent does something
	gens      map[genKey]*generation
	current   []*generation // by resource: the newest open generation of this epoch, which denials land on
	floors    []floorRef    // by resource
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

func (r *SimRecorder) newMode(mode harness.Mode) *modeState {
	slot := &idSlot{}
	return &modeState{
		slot:    slot,
		slotCtx: withIDSlot(context.Background(), slot),
		r:       r,
		read:    history.NewReader(&r.run.header),
		base:    fold(uint64(r.t0.UnixNano()), hashString(r.run.scenario), r.run.seed, hashString(string(mode))),
		agents:  make([]*agentState, len(r.agentNames)),
		gens:    make(map[genKey]*generation),
		current: make([]*generation, len(r.resourceNames)),
		floors:  make([]floorRef, len(r.resourceNames)),
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

// resourceIn reports whether an event's resource index names a resource
// (a partition's names none), growing the per-resource slices if the
// events name more resources than the scenario did.
func (m *modeState) resourceIn(i int) bool {
	if i < 0 {
		return false
	}
	if i >= len(m.current) {
		m.current = slices.Grow(m.current, i+1-len(m.current))[:i+1]
		m.floors = slices.Grow(m.floors, i+1-len(m.floors))[:i+1]
	}
	return true
}

func (m *modeState) event(e history.Event) {
	m.read.Add(&e)
	m.last = max(m.last, e.At)
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
			m.settle(e.Agent, at, e.At, OutcomeNoReply, ErrorNoReply, "no reply: the requester gave up waiting")
		}
	case history.Acquired:
		m.acquired(e)
	case history.Denied:
		m.denied(e)
	case history.Renewed, history.RenewRefused:
		m.renewAnswered(e)
	case history.Expired:
		g := m.coordinatorSide(e, e.At-m.r.run.ttl)
		m.rootEvent(g, EventExpired, e.At)
		m.coordinatorEnded(g, e.At)
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
	case history.AdmitPushed:
		m.pushed(e)
	case history.PushDropped:
		g := m.coordinatorSide(e, e.At)
		m.rootEvent(g, EventPushDropped, e.At)
	case history.PartitionBegan, history.PartitionEnded:
		// A partition concerns the agent, not a fence: it lands on the
		// lease the agent holds, if any.
		if g := m.agent(e.Agent).holding; g != nil {
			name := EventPartitionBegan
			if e.Kind == history.PartitionEnded {
				name = EventPartitionEnded
			}
			m.rootEvent(g, name, e.At)
		}
	}
}

// holding returns the generation the event's agent acts under, if the
// event is about that lease.
func (m *modeState) holding(e history.Event) *generation {
	g := m.agent(e.Agent).holding
	if g == nil || g.key.fence != e.Fence || g.key.resource != e.Resource {
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

// generation returns the trace of key, starting its root span at start if
// it is new.
func (m *modeState) generation(key genKey, agent int, start time.Duration) *generation {
	if g := m.gens[key]; g != nil {
		return g
	}
	tid := traceIDFrom(fold(m.base, traceLease, uint64(key.epoch), uint64(key.resource), uint64(key.fence)))
	holder := m.r.agent(agent)
	attrs := append(m.startAttrs(),
		LeaseResource.String(m.r.resource(key.resource)),
		LeaseHolder.String(holder),
		LeaseFence.Int64(int64(key.fence)),
		LeaseTTL.Int64(m.r.run.ttl.Milliseconds()),
		SimAgent.String(holder),
		SimEpoch.Int(key.epoch))
	attrs = append(attrs, m.rootAttrs...)
	ctx, root := m.start(m.slotCtx, tid, spanIDFor(tid, 0), SpanLease, start, optKindInternal, attrs)
	g := &generation{key: key, agent: agent, traceID: tid, ctx: ctx, root: root, last: start}
	m.gens[key] = g
	if key.epoch == m.epoch && m.resourceIn(key.resource) {
		if c := m.current[key.resource]; c == nil || c.key.fence <= key.fence {
			m.current[key.resource] = g
		}
	}
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

// --- acquires ---

func (m *modeState) acquireSent(e history.Event) {
	a := m.agent(e.Agent)
	if at := a.attempt; at != nil {
		if at.id == e.RequestID {
			at.lastSent = e.At // a resend: RequestRetried came just before
			return
		}
		// The agent starts over without having given up (a scripted
		// agent acquiring again).
		m.settle(e.Agent, at, e.At, OutcomeNoReply, ErrorNoReply, "no reply: the requester gave up waiting")
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
	key := genKey{int(e.Incarnation), e.Resource, e.Fence}
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
	m.takeDenials(g, at)
	attrs := append(m.startAttrs(),
		LeaseRequestID.String(e.RequestID),
		LeaseOutcome.String(OutcomeGranted),
		LeaseBelievedFor.Int64((e.Deadline - e.At).Milliseconds()))
	if at.sent < e.At {
		sp := m.child(g, SpanLeaseAcquire, at.sent, optKindClient, attrs)
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
	if !m.resourceIn(e.Resource) {
		m.deniedSpan(d, at.events)
		return
	}
	g := m.current[e.Resource]
	if g != nil && g.agent == e.Other && !g.coordEnded {
		m.deny(g, d)
		return
	}
	if hat := m.agent(e.Other).attempt; hat != nil && hat.resource == e.Resource && e.Other != e.Agent {
		hat.denials = append(hat.denials, d)
		return
	}
	if g != nil && g.agent == e.Other {
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
	attrs := append(m.startAttrs(), LeaseReason.String(string(d.reason)), LeaseRetryAfter.Int64(d.retryAfter.Milliseconds()))
	if d.holder >= 0 {
		attrs = append(attrs, LeaseHeldBy.String(m.r.agent(d.holder)))
	}
	m.settle(d.agent, &attempt{id: d.id, resource: d.resource, sent: d.sent, events: events}, d.at, OutcomeDenied, "", "", attrs...)
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
	attrs = append(attrs, LeaseRequestID.String(at.id), LeaseOutcome.String(outcome))
	if errType != "" {
		attrs = append(attrs, ErrorType.String(errType))
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
		sp = m.child(g, SpanLeaseAcquire, at.sent, optKindClient, attrs)
	default:
		// A root of its own: it says what it is about.
		attrs = append(attrs, LeaseResource.String(m.r.resource(at.resource)), LeaseHolder.String(m.r.agent(agent)))
		attrs = append(attrs, m.rootAttrs...)
		tid := traceIDFrom(fold(m.base, traceAcquire, uint64(agent), hashString(at.id)))
		_, sp = m.start(m.slotCtx, tid, spanIDFor(tid, 0), SpanLeaseAcquire, at.sent, optKindClient, attrs)
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
			m.finish(q, e.At, OutcomeNoReply, ErrorNoReply, "no reply: every copy of the request or its reply was lost")
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
	attrs = append(attrs, LeaseOutcome.String(outcome))
	if errType != "" {
		attrs = append(attrs, ErrorType.String(errType))
	}
	q.span.SetAttributes(attrs...)
	m.keep(attrs)
	if errType != "" {
		q.span.SetStatus(codes.Error, errMsg)
	}
	q.span.End(m.r.ts(at))
	q.gen.touch(at)
}

// --- renewals and releases ---

func (m *modeState) renewSent(e history.Event) {
	g := m.holding(e)
	if g == nil {
		return
	}
	q := &request{kind: history.RequestRenew, id: e.RequestID, gen: g, copies: 1}
	q.span = m.child(g, SpanLeaseRenew, e.At, optKindClient, append(m.startAttrs(), LeaseRequestID.String(e.RequestID)))
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
			m.finish(q, e.At, OutcomeRenewed, "", "",
				append(m.startAttrs(), LeaseBelievedFor.Int64((e.Deadline-e.At).Milliseconds()))...)
		}
		return
	}
	m.finish(q, e.At, OutcomeRefused, ErrorLeaseLost, "renewal refused: "+string(e.Reason),
		append(m.startAttrs(), LeaseReason.String(string(e.Reason)))...)
}

func (m *modeState) releaseSent(e history.Event) {
	g := m.holding(e)
	if g == nil {
		g = m.gens[genKey{int(e.Incarnation), e.Resource, e.Fence}]
	}
	if g == nil {
		return
	}
	q := &request{kind: history.RequestRelease, gen: g, copies: 1, arrives: e.At + e.Dur}
	q.span = m.child(g, SpanLeaseRelease, e.At, optKindClient, m.startAttrs())
	g.open = append(g.open, q)
	m.agent(e.Agent).release = q
}

func (m *modeState) released(e history.Event) {
	g := m.gens[genKey{int(e.Incarnation), e.Resource, e.Fence}]
	if g == nil {
		return
	}
	for _, q := range g.open {
		if q.kind == history.RequestRelease && !q.done {
			m.finish(q, e.At, OutcomeReleased, "", "")
		}
	}
	m.rootEvent(g, EventReleased, e.At)
	m.coordinatorEnded(g, e.At)
}

// releaseRefused ends the release the coordinator refused: the lease had
// already ended there (expired, or superseded by a restart's reissue).
func (m *modeState) releaseRefused(e history.Event) {
	q := m.agent(e.Agent).release
	if q == nil || q.done || q.gen.key.resource != e.Resource || q.gen.key.fence != e.Fence {
		return
	}
	m.finish(q, e.At, OutcomeRefused, "", "", append(m.startAttrs(), LeaseReason.String(string(e.Reason)))...)
}

// --- the coordinator's side ---

// coordinatorSide returns the generation a coordinator-side event is about.
// The coordinator can be seen to mint a fence before its holder hears of it
// (a push, an expiry before a slow or lost reply): then the generation
// starts at the pending acquire's send, or at start if there is none.
func (m *modeState) coordinatorSide(e history.Event, start time.Duration) *generation {
	key := genKey{int(e.Incarnation), e.Resource, e.Fence}
	if g := m.gens[key]; g != nil {
		return g
	}
	if at := m.agent(e.Agent).attempt; at != nil && at.resource == e.Resource && at.gen == nil {
		at.gen = m.generation(key, e.Agent, at.sent)
		m.takeDenials(at.gen, at)
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

func (m *modeState) pushed(e history.Event) {
	g := m.coordinatorSide(e, e.At)
	raised := e.Outcome == "" && e.OtherFence == e.Fence
	outcome := OutcomeRaised
	if !raised {
		outcome = OutcomeBelowFloor
	}
	attrs := append(m.startAttrs(), FenceFloor.Int64(int64(e.OtherFence)), FenceOutcome.String(outcome))
	if e.Other >= 0 {
		attrs = append(attrs, FenceFloorHolder.String(m.r.agent(e.Other)))
	}
	m.rootEvent(g, EventAdmitPushed, e.At, attrs...)
	if raised && m.resourceIn(e.Resource) {
		m.floors[e.Resource] = floorRef{fence: e.Fence, agent: e.Agent, span: g.root.SpanContext()}
	}
}

func (m *modeState) restarted(e history.Event) {
	for _, g := range m.sortedGens() {
		if g.key.epoch == m.epoch && !g.coordEnded {
			m.rootEvent(g, EventRestarted, e.At, LeaseReason.String(string(e.Outcome)))
			m.coordinatorEnded(g, e.At)
		}
	}
	m.epoch = int(e.Incarnation) // the incarnation the history names
	clear(m.current)             // denials from the new incarnation are not about the old one's leases
}

// --- writes ---

func (m *modeState) commit(e history.Event) {
	g := m.holding(e)
	if g == nil || !m.resourceIn(e.Resource) {
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
		if f := m.floors[e.Resource]; f.fence == e.OtherFence && f.agent == e.Other && f.span.IsValid() {
			links = append(links, trace.Link{SpanContext: f.span, Attributes: []attribute.KeyValue{
				LeaseHolder.String(m.r.agent(f.agent)), LeaseFence.Int64(int64(f.fence)),
			}})
		}
	}
	attrs = append(attrs, FenceOutcome.String(outcome))
	var errType string
	var err error
	if refused {
		rej := leasefence.Rejection{Resource: m.r.resource(e.Resource), Holder: m.r.agent(e.Agent), Fence: e.Fence,
			FloorHolder: m.r.agent(e.Other), FloorFence: e.OtherFence}
		err, errType = &leasefence.StaleFenceError{Rejection: rej}, ErrorStaleFence
		if e.OtherFence == e.Fence {
			errType = ErrorTokenConflict
			err = fmt.Errorf("%w: fence %d at %q belongs to %s", leasefence.ErrTokenConflict, e.Fence, rej.Resource, rej.FloorHolder)
		}
		attrs = append(attrs, ErrorType.String(errType))
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
		sp := m.child(g, SpanFenceCommit, start, optKindInternal, attrs, links...)
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
			m.finish(q, max(q.arrives, g.coordEnd), OutcomeRefused, "", "")
		default:
			m.finish(q, at, OutcomeUnanswered, "", "")
		}
	}
	for _, d := range g.denials {
		attrs := append(m.startAttrs(),
			LeaseRequester.String(m.r.agent(d.agent)),
			LeaseReason.String(string(d.reason)),
			LeaseRetryAfter.Int64(d.retryAfter.Milliseconds()),
			LeaseDenials.Int(d.count))
		if d.count > 1 {
			attrs = append(attrs, LeaseDeniedFor.Int64((d.last - d.first).Milliseconds()))
		}
		m.addEvent(g.root, EventAcquireDenied, d.first, attrs...)
	}
	if g.denials != nil {
		m.spareDenials = append(m.spareDenials, g.denials[:0])
		g.denials = nil
	}
	g.root.End(m.r.ts(max(at, g.last)))
	delete(m.gens, g.key)
	if m.resourceIn(g.key.resource) && m.current[g.key.resource] == g {
		m.current[g.key.resource] = nil
	}
	if g.agent < len(m.agents) {
		if a := m.agents[g.agent]; a != nil && a.holding == g {
			a.holding, a.renew = nil, nil
		}
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

// close ends what is still open, as of the run's stop (or the mode's last
// event, if later).
func (m *modeState) close(stopped time.Duration) {
	m.last = max(m.last, stopped)
	for i, a := range m.agents {
		if a != nil && a.attempt != nil {
			m.settle(i, a.attempt, m.last, OutcomeUnanswered, "", "")
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
