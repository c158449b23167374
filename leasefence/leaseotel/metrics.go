package leaseotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/leasefence/lab/leasefence"
)

// Metric names, in the OpenTelemetry semantic-convention style: dotted
// lowercase, a count named for what it counts (no _total), the unit in
// the instrument. Which resource a point is about is an attribute
// (LeaseResource); holders and fences are not, to keep the series few.
const (
	// MetricAcquires counts the acquires a coordinator answered ({acquire}),
	// by LeaseResource, LeaseOutcome (granted, denied) and, on a denial,
	// LeaseReason.
	MetricAcquires = "lease.acquires"
	// MetricRenewals counts the renewals a coordinator answered
	// ({renewal}), by LeaseResource, LeaseOutcome (renewed, refused) and,
	// on a refusal, LeaseReason.
	MetricRenewals = "lease.renewals"
	// MetricHeld is, per LeaseResource, the leases a coordinator has
	// granted and that are neither released, refused a renewal, nor past
	// their TTL since the last grant or renewal was answered ({lease}): 0
	// or 1, as a coordinator grants one lease per resource at a time.
	MetricHeld = "lease.held"
	// MetricLost counts the leases that ended other than by their holder's
	// release ({lease}), by LeaseResource and LeaseReason: a renewal the
	// coordinator refused (expired, superseded, released, unknown), or a
	// newer grant on the resource while the lease was never released nor
	// refused (expired: it ran out unrenewed). Each lease is counted once.
	MetricLost = "lease.lost"
	// MetricAcquireDuration is a client's acquire latency (s): from
	// BeginAcquire to CompleteAcquire, by LeaseResource and LeaseOutcome
	// (granted) or ErrorType.
	MetricAcquireDuration = "lease.acquire.duration"
	// MetricRenewalDuration is a client's renewal latency (s): from
	// BeginRenewal to CompleteRenewal, by LeaseResource and LeaseOutcome
	// (renewed) or ErrorType.
	MetricRenewalDuration = "lease.renewal.duration"
	// MetricCommits counts a gate's decided commits ({commit}), by
	// LeaseResource, FenceOutcome (admitted, refused) and, when the commit
	// failed or was refused, ErrorType (stale_fence, token_conflict,
	// write_panicked, or the write's error).
	MetricCommits = "fence.commits"
	// MetricRejections counts the refusals a gate logged ({rejection}), by
	// LeaseResource.
	MetricRejections = "fence.rejections"
	// MetricFloor is a gate's floor, the highest fence it admitted
	// ({fence}), by LeaseResource, recorded after every decided commit and
	// admit.
	MetricFloor = "fence.floor"
	// MetricSessionsEnded counts the sessions of leasefence.Hold that
	// ended ({session}), by LeaseResource and LeaseReason: released by the
	// holder, or lost (expired, its deadline passed unrenewed; refused, the
	// coordinator refused a renewal; failed, a renewal could not be made).
	// The holder's side of MetricLost: a holder learns of its loss here
	// even where the coordinator takes no hooks (etcd, Redis).
	MetricSessionsEnded = "lease.sessions.ended"
)

// NewMetricHooks returns leasefence hooks that record what a Coordinator,
// Client and FenceGate do as the metrics above, through mp's meter (the
// global MeterProvider when mp is nil), named ScopeName like the spans.
// They are safe for concurrent use and may be shared by many components,
// a client hook by many clients. The client hook remembers at most 1024
// requests begun and not completed (a request never completed is not
// measured). The error is the meter's, failing to make an instrument.
//
// A lease that runs out unrenewed is seen by the coordinator only when it
// next hears of the resource, so MetricLost counts it then; lease.held
// stops counting it at its TTL. Why a Session saw its lease lost is its Err.
func NewMetricHooks(mp metric.MeterProvider) (*Hooks, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return newMetricHooks(mp, time.Now)
}

func newMetricHooks(mp metric.MeterProvider, now func() time.Time) (*Hooks, error) {
	m := &metricHooks{now: now, leases: map[string]heldLease{}, begun: map[string]begunRequest{}}
	if err := m.instruments(mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))); err != nil {
		return nil, err
	}
	return &Hooks{
		Coordinator: &leasefence.CoordinatorTrace{Acquire: m.coordAcquire, Renew: m.coordRenew, Release: m.coordRelease},
		Client:      &leasefence.ClientTrace{Begin: m.clientBegin, Complete: m.clientComplete},
		Gate:        &leasefence.GateTrace{Commit: m.gateCommit, Admit: m.gateAdmit},
		Session:     &leasefence.SessionTrace{End: m.sessionEnd},
	}, nil
}

type metricHooks struct {
	acquires, renewals, lost, commits, rejections, sessionsEnded metric.Int64Counter
	acquireDuration, renewalDuration                             metric.Float64Histogram
	floor                                                        metric.Int64Gauge

	now func() time.Time // wall time, which dates a held lease's end

	mu     sync.Mutex
	leases map[string]heldLease    // the coordinator's current lease, by resource
	begun  map[string]begunRequest // client requests awaiting completion, by request id
}

type begunRequest struct {
	at       time.Time
	resource string
}

// heldLease is the last lease granted on a resource.
type heldLease struct {
	fence leasefence.Fence
	until time.Time // the wall time its TTL runs out, from the last answer
	ended bool      // released, or refused a renewal (and so counted lost)
}

func (m *metricHooks) instruments(meter metric.Meter) error {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	m.acquires = counter(MetricAcquires, "{acquire}", "Acquires answered by the coordinator.")
	m.renewals = counter(MetricRenewals, "{renewal}", "Renewals answered by the coordinator.")
	m.lost = counter(MetricLost, "{lease}", "Leases that ended other than by their holder's release.")
	m.commits = counter(MetricCommits, "{commit}", "Commits decided by the fence gate.")
	m.rejections = counter(MetricRejections, "{rejection}", "Refusals logged by the fence gate.")
	m.sessionsEnded = counter(MetricSessionsEnded, "{session}", "Sessions of Hold that ended: released by their holder, or lost.")
	m.acquireDuration = seconds(MetricAcquireDuration, "Time from a client's acquire request to its completion.")
	m.renewalDuration = seconds(MetricRenewalDuration, "Time from a client's renewal request to its completion.")
	var err error
	m.floor, err = meter.Int64Gauge(MetricFloor, metric.WithUnit("{fence}"), metric.WithDescription("The highest fence the gate admitted."))
	errs = append(errs, err)
	_, err = meter.Int64ObservableGauge(MetricHeld, metric.WithUnit("{lease}"),
		metric.WithDescription("Leases granted and not yet released, refused or run out."), metric.WithInt64Callback(m.observeHeld))
	errs = append(errs, err)
	return errors.Join(errs...)
}

func resourceAttr(resource string) metric.MeasurementOption {
	return metric.WithAttributes(LeaseResource.String(resource))
}

// --- coordinator ---

func (m *metricHooks) coordAcquire(in leasefence.AcquireInfo) {
	req, out := in.Request, in.Outcome
	if !out.OK {
		m.acquires.Add(context.Background(), 1, metric.WithAttributes(LeaseResource.String(req.Resource),
			LeaseOutcome.String(OutcomeDenied), LeaseReason.String(string(out.Reason))))
		return
	}
	m.acquires.Add(context.Background(), 1, metric.WithAttributes(LeaseResource.String(req.Resource), LeaseOutcome.String(OutcomeGranted)))
	m.mu.Lock()
	prev, had := m.leases[req.Resource]
	m.leases[req.Resource] = heldLease{fence: out.Grant.Token.Fence, until: m.now().Add(out.Grant.TTL)}
	m.mu.Unlock()
	if had && !prev.ended && prev.fence != out.Grant.Token.Fence {
		m.lose(req.Resource, leasefence.ReasonExpired)
	}
}

func (m *metricHooks) coordRenew(in leasefence.RenewInfo) {
	t := in.Request.Token
	if in.Outcome.OK {
		m.renewals.Add(context.Background(), 1, metric.WithAttributes(LeaseResource.String(t.Resource), LeaseOutcome.String(OutcomeRenewed)))
		m.mu.Lock()
		m.leases[t.Resource] = heldLease{fence: t.Fence, until: m.now().Add(in.Outcome.Grant.TTL)}
		m.mu.Unlock()
		return
	}
	reason := in.Outcome.Reason
	m.renewals.Add(context.Background(), 1, metric.WithAttributes(LeaseResource.String(t.Resource),
		LeaseOutcome.String(OutcomeRefused), LeaseReason.String(string(reason))))
	// A lease already replaced by a newer grant was counted lost then; one
	// never seen granted (hooks set after its grant) is counted now.
	m.mu.Lock()
	cur, had := m.leases[t.Resource]
	first := !had || cur.fence == t.Fence && !cur.ended
	if first && had {
		m.leases[t.Resource] = heldLease{fence: t.Fence, ended: true}
	}
	m.mu.Unlock()
	if first {
		m.lose(t.Resource, reason)
	}
}

func (m *metricHooks) coordRelease(in leasefence.ReleaseInfo) {
	if !in.Outcome.OK {
		return
	}
	m.mu.Lock()
	if cur, ok := m.leases[in.Token.Resource]; ok && cur.fence == in.Token.Fence {
		m.leases[in.Token.Resource] = heldLease{fence: cur.fence, ended: true}
	}
	m.mu.Unlock()
}

func (m *metricHooks) sessionEnd(in leasefence.SessionEndInfo) {
	m.sessionsEnded.Add(context.Background(), 1, metric.WithAttributes(LeaseResource.String(in.Token.Resource), LeaseReason.String(string(in.Reason))))
}

func (m *metricHooks) lose(resource string, reason leasefence.Reason) {
	m.lost.Add(context.Background(), 1, metric.WithAttributes(LeaseResource.String(resource), LeaseReason.String(string(reason))))
}

func (m *metricHooks) observeHeld(_ context.Context, o metric.Int64Observer) error {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for resource, l := range m.leases {
		held := int64(0)
		if now.Before(l.until) {
			held = 1
		}
		o.Observe(held, resourceAttr(resource))
	}
	return nil
}

// --- client ---

func (m *metricHooks) clientBegin(in leasefence.BeginInfo) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.begun[in.RequestID]; !ok && len(m.begun) >= maxBegun {
		for id := range m.begun { // any one: a request this old is likely abandoned
			delete(m.begun, id)
			break
		}
	}
	m.begun[in.RequestID] = begunRequest{at: now, resource: in.Token.Resource}
}

func (m *metricHooks) clientComplete(in leasefence.CompleteInfo) {
	now := m.now()
	m.mu.Lock()
	b, ok := m.begun[in.RequestID]
	// A mismatched completion does not use the request up.
	if ok && !errors.Is(in.Err, leasefence.ErrGrantMismatch) {
		delete(m.begun, in.RequestID)
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	hist, outcome := m.acquireDuration, OutcomeGranted
	if in.Kind == leasefence.KindRenew {
		hist, outcome = m.renewalDuration, OutcomeRenewed
	}
	result := LeaseOutcome.String(outcome)
	if in.Err != nil {
		result = ErrorType.String(errorType(in.Err))
	}
	hist.Record(context.Background(), now.Sub(b.at).Seconds(), metric.WithAttributes(LeaseResource.String(b.resource), result))
}

// --- gate ---

func (m *metricHooks) gateCommit(in leasefence.CommitInfo) {
	ctx := context.Background()
	resource := in.Token.Resource
	attrs := []attribute.KeyValue{LeaseResource.String(resource), FenceOutcome.String(OutcomeAdmitted)}
	if !in.Admitted {
		attrs[1] = FenceOutcome.String(OutcomeRefused)
	}
	if in.Err != nil || in.Panicked {
		attrs = append(attrs, ErrorType.String(commitErrorType(in)))
	}
	m.commits.Add(ctx, 1, metric.WithAttributes(attrs...))
	floor := in.Floor.Fence
	if in.Admitted && in.Token.Fence > floor {
		floor = in.Token.Fence
	}
	if !in.Admitted && in.Rejection.Seq != 0 {
		m.rejections.Add(ctx, 1, resourceAttr(resource))
	}
	m.floor.Record(ctx, int64(floor), resourceAttr(resource))
}

func (m *metricHooks) gateAdmit(in leasefence.AdmitInfo) {
	m.floor.Record(context.Background(), int64(in.Floor.Fence), resourceAttr(in.Token.Resource))
}
