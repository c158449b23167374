package tracing

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/history"
)

// Recorder records a run's history as OpenTelemetry traces: it reads the
// events of any runner (the simulator, the real-time runner, or a history
// file read back), through a history.Reader per mode, and knows nothing of
// the runner. It is a subscriber of a run: pass it as one (in
// harness.RunOptions.Subscribers, to harness.NewLive, or to the real-time
// runner), or feed it a history file's events, then call Close.
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
// coordinator named, one per requester (leaseotel.LeaseDenials counts its refusals),
// so a holder's trace shows who queued behind it. Its request's lost or
// retried messages are not recorded. Only an acquire that got no lease and
// has no such lease in view (never answered, or refused with its holder's
// trace already ended) is a short root span "lease acquire" of its own.
//
// Every timestamp is t0 plus the run's instant. Ids are derived from the
// scenario's name and seed, the mode and the generation (and, for a
// real-time run, t0); they are used when the TracerProvider was built with
// NewIDGenerator.
//
// The OpenTelemetry work is done on a goroutine of the recorder, not on
// the simulation's: Event only queues the event (the run waits only when
// the recorder is thousands of events behind), so with a second core the
// spans are made while the run goes on. Close returns once every queued
// event is recorded. A paced run's events are handed over within 50ms, so
// its spans appear as it runs.
//
// Recorder is safe for concurrent use: events of a paced run and Close
// may come from different goroutines. It never changes the run it records.
type Recorder struct {
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
	modes  map[history.Mode]*modeState
	lastAt time.Duration
	lastTS trace.SpanEventOption
	// stoppedAt is when the run stopped, as CloseAt was told; what is
	// still open then ends there (or at a mode's last event, if later).
	stoppedAt time.Duration
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

// runInfo is what the recorder needs from the history's header.
type runInfo struct {
	scenario string
	seed     uint64
	ttl      time.Duration
	header   history.Header // the participants, for each mode's history.Reader
}

// NewRecorder returns a recorder for the history with header h, with t0
// the wall time the run's instant 0 maps to (time.Now() when the run
// starts, so that a time-window search in a tracing backend finds it).
func NewRecorder(h history.Header, t0 time.Time, opts ...Option) *Recorder {
	h.Agents, h.Resources = slices.Clone(h.Agents), slices.Clone(h.Resources)
	return &Recorder{
		tracer: tracer(opts),
		t0:     t0,
		run:    runInfo{scenario: h.Scenario, seed: h.Seed, ttl: h.TTL, header: h},
		modes:  make(map[history.Mode]*modeState, len(h.Modes)),
		queue:  make(chan []history.Event, queueBatches),
		free:   make(chan []history.Event, queueBatches+1),
		done:   make(chan struct{}),
	}
}

// runID is what every id of the run is derived from: the scenario and the
// seed, which fix a simulated run event for event, so the same run traced
// twice gives the same trace. A real-time run is not fixed by its seed
// (when things happen is the machine's), so its start t0 is mixed in too:
// two real-time runs sent to one collector are never merged.
func (r *Recorder) runID() uint64 {
	id := fold(hashString(r.run.scenario), r.run.seed)
	if !history.Simulated(r.run.header.Backend) {
		id = fold(id, uint64(r.t0.UnixNano()))
	}
	return id
}

// RunAttributes are the attributes that identify the run of a history with
// header h: sim.scenario and sim.seed. Every root span a Recorder makes
// carries them; pass them in Config.Attributes to put them on the resource
// too.
func RunAttributes(h history.Header) []attribute.KeyValue {
	return []attribute.KeyValue{SimScenario.String(h.Scenario), SimSeed.String(strconv.FormatUint(h.Seed, 10))}
}

// Event records one event. Events of one mode must come in the order of
// the history (a subscriber's guarantee); events after Close are ignored,
// and so is an event the mode's history.Reader refuses.
func (r *Recorder) Event(e history.Event) {
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
func (r *Recorder) handOver() {
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
func (r *Recorder) flushBatch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.handOver()
	}
}

// record is the recording goroutine: it makes the spans of every queued
// event, in order, and once Close has closed the queue, ends the spans
// still open.
func (r *Recorder) record() {
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
	modes := make([]history.Mode, 0, len(r.modes))
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
func (r *Recorder) Close() { r.CloseAt(0) }

// CloseAt is Close for a run known to have stopped at the virtual instant
// stopped (its Duration if it ran to its end): a lease still live, or a
// request still waiting for its reply, then lasts until the run stopped,
// not only until the last thing that happened, so that a request sent at
// the last event is not a span of no length.
func (r *Recorder) CloseAt(stopped time.Duration) {
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
func (r *Recorder) ts(at time.Duration) trace.SpanEventOption {
	if r.lastTS == nil || r.lastAt != at {
		r.lastAt, r.lastTS = at, trace.WithTimestamp(r.t0.Add(at))
	}
	return r.lastTS
}

// agent and resource name participant i of the header; the Reader has
// refused every event that names one outside it.
func (r *Recorder) agent(i int) string { return r.run.header.Agents[i] }

func (r *Recorder) resource(i int) string { return r.run.header.Resources[i] }
