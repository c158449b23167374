package leaseotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/leasefence"
)

// Hooks are leasefence observation hooks that turn what a production
// Coordinator, Client and FenceGate do into spans, in wall time, with the
// span names and attributes of simulated runs:
//
//   - Coordinator: a server span "lease acquire", "lease renew" or
//     "lease release" per answered request (zero length: the hook runs once
//     the answer is made).
//   - Client: a client span "lease acquire" or "lease renew" from
//     BeginAcquire/BeginRenewal to the matching Complete call.
//   - Gate: a span "fence commit" per decided Commit (from the call to its
//     return when the gate has a clock, WithGateClock; zero length
//     otherwise) and "fence admit" per Admit. A refused commit has status
//     Error and error.type stale_fence or token_conflict.
//
// The hooks receive no context, so every span is a root; search by
// lease.resource, lease.holder or lease.fence to see one lease's story.
// Hooks are safe for concurrent use and may be shared by many components.
// The client hook remembers the last 1024 requests begun and not completed
// (a request never completed leaves no span).
type Hooks struct {
	Coordinator *leasefence.CoordinatorTrace // set in CoordinatorOptions.Trace
	Client      *leasefence.ClientTrace      // set in ClientOptions.Trace
	Gate        *leasefence.GateTrace        // pass to leasefence.WithGateTrace
	Session     *leasefence.SessionTrace     // set in HoldOptions.Trace; nil from NewHooks
}

// noParent is the context every hook span starts from: the hooks are given
// none, so they cannot join a caller's trace.
var noParent = context.Background()

// maxBegun bounds the client hook's record of requests awaiting completion,
// like the Client's own record (leasefence.DefaultRequestRecord).
const maxBegun = 1024

// NewHooks returns hooks that emit spans through the tracer provider of the
// options (the global one by default).
func NewHooks(opts ...Option) *Hooks {
	h := &hooks{tracer: newConfig(opts).tracer(), begun: make(map[string]begun)}
	return &Hooks{
		Coordinator: &leasefence.CoordinatorTrace{Acquire: h.coordAcquire, Renew: h.coordRenew, Release: h.coordRelease},
		Client:      &leasefence.ClientTrace{Begin: h.clientBegin, Complete: h.clientComplete},
		Gate:        &leasefence.GateTrace{Commit: h.gateCommit, Admit: h.gateAdmit},
	}
}

type hooks struct {
	tracer trace.Tracer

	mu    sync.Mutex
	begun map[string]begun // by request id, which is unique across clients
	order []string         // request ids in the order begun, for eviction
}

type begun struct {
	at   time.Time
	info leasefence.BeginInfo
}

func tokenAttrs(t leasefence.Token) []attribute.KeyValue {
	kv := []attribute.KeyValue{LeaseResource.String(t.Resource), LeaseHolder.String(t.Holder)}
	if t.Fence != 0 {
		kv = append(kv, LeaseFence.Int64(int64(t.Fence)))
	}
	return kv
}

// instant emits a zero-length span: the hooks run after the fact.
func (h *hooks) instant(name string, kind trace.SpanKind, attrs []attribute.KeyValue) {
	_, sp := h.tracer.Start(noParent, name, trace.WithNewRoot(), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	sp.End()
}

// --- coordinator ---

func (h *hooks) coordAcquire(in leasefence.AcquireInfo) {
	req, out := in.Request, in.Outcome
	attrs := []attribute.KeyValue{
		LeaseResource.String(req.Resource), LeaseHolder.String(req.Holder),
		LeaseRequestID.String(req.RequestID), LeaseReplayed.Bool(in.Replayed),
	}
	if out.OK {
		attrs = append(attrs, LeaseOutcome.String(OutcomeGranted), LeaseFence.Int64(int64(out.Grant.Token.Fence)),
			LeaseTTL.Int64(out.Grant.TTL.Milliseconds()))
	} else {
		attrs = append(attrs, LeaseOutcome.String(OutcomeDenied), LeaseReason.String(string(out.Reason)))
		if out.HeldBy != "" {
			attrs = append(attrs, LeaseHeldBy.String(out.HeldBy), LeaseRetryAfter.Int64(out.RetryAfter.Milliseconds()))
		}
	}
	h.instant(SpanLeaseAcquire, trace.SpanKindServer, attrs)
}

// A refused renewal or release is an answer, not a failure of the
// coordinator: like an HTTP 4xx on a server span, it leaves the status unset.
func (h *hooks) coordRenew(in leasefence.RenewInfo) {
	attrs := append(tokenAttrs(in.Request.Token), LeaseRequestID.String(in.Request.RequestID))
	if in.Outcome.OK {
		attrs = append(attrs, LeaseOutcome.String(OutcomeRenewed), LeaseTTL.Int64(in.Outcome.Grant.TTL.Milliseconds()))
	} else {
		attrs = append(attrs, LeaseOutcome.String(OutcomeRefused), LeaseReason.String(string(in.Outcome.Reason)))
	}
	h.instant(SpanLeaseRenew, trace.SpanKindServer, attrs)
}

func (h *hooks) coordRelease(in leasefence.ReleaseInfo) {
	attrs := tokenAttrs(in.Token)
	if in.Outcome.OK {
		attrs = append(attrs, LeaseOutcome.String(OutcomeReleased))
	} else {
		attrs = append(attrs, LeaseOutcome.String(OutcomeRefused), LeaseReason.String(string(in.Outcome.Reason)))
	}
	h.instant(SpanLeaseRelease, trace.SpanKindServer, attrs)
}

// --- client ---

func (h *hooks) clientBegin(in leasefence.BeginInfo) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.begun[in.RequestID]; !ok {
		h.order = append(h.order, in.RequestID)
	}
	h.begun[in.RequestID] = begun{at: now, info: in}
	for len(h.begun) > maxBegun {
		oldest := h.order[0]
		h.order = h.order[1:]
		delete(h.begun, oldest)
	}
	// Completed ids stay in order until they reach its front; compact so
	// it never outgrows the record by much.
	if len(h.order) > 2*maxBegun {
		kept := h.order[:0]
		for _, id := range h.order {
			if _, ok := h.begun[id]; ok {
				kept = append(kept, id)
			}
		}
		h.order = kept
	}
}

func (h *hooks) clientComplete(in leasefence.CompleteInfo) {
	h.mu.Lock()
	b, ok := h.begun[in.RequestID]
	// A mismatched completion does not use the request up: keep the record
	// for the completion that will.
	if ok && !errors.Is(in.Err, leasefence.ErrGrantMismatch) {
		delete(h.begun, in.RequestID)
	}
	h.mu.Unlock()

	name := SpanLeaseAcquire
	if in.Kind == leasefence.KindRenew {
		name = SpanLeaseRenew
	}
	token := in.Grant.Token
	if ok {
		token = b.info.Token
		if in.Err == nil {
			token.Fence = in.Grant.Token.Fence
		}
	}
	attrs := append(tokenAttrs(token), LeaseRequestID.String(in.RequestID))
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient)}
	if ok {
		opts = append(opts, trace.WithTimestamp(b.at))
	}
	if in.Err == nil {
		outcome := OutcomeGranted
		if in.Kind == leasefence.KindRenew {
			outcome = OutcomeRenewed
		}
		attrs = append(attrs, LeaseOutcome.String(outcome), LeaseTTL.Int64(in.Lease.TTL.Milliseconds()))
	} else {
		attrs = append(attrs, ErrorType.String(errorType(in.Err)))
	}
	_, sp := h.tracer.Start(noParent, name, append(opts, trace.WithAttributes(attrs...))...)
	if in.Err != nil {
		sp.RecordError(in.Err)
		sp.SetStatus(codes.Error, in.Err.Error())
	}
	sp.End()
}

// --- gate ---

func (h *hooks) gateCommit(in leasefence.CommitInfo) {
	now := time.Now()
	start := now
	if d, err := in.End.Sub(in.Start); err == nil && d > 0 {
		start = now.Add(-d)
	}
	attrs := append(tokenAttrs(in.Token), FenceNested.Bool(in.Nested))
	if in.Floor.Fence != 0 {
		attrs = append(attrs, FenceFloor.Int64(int64(in.Floor.Fence)))
	}
	if in.Floor.Holder != "" {
		attrs = append(attrs, FenceFloorHolder.String(in.Floor.Holder))
	}
	outcome := OutcomeAdmitted
	if !in.Admitted {
		outcome = OutcomeRefused
	}
	attrs = append(attrs, FenceOutcome.String(outcome))
	if in.Err != nil || in.Panicked {
		attrs = append(attrs, ErrorType.String(commitErrorType(in)))
	}
	_, sp := h.tracer.Start(noParent, SpanFenceCommit, trace.WithNewRoot(), trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	switch {
	case in.Err != nil:
		sp.RecordError(in.Err, trace.WithTimestamp(now))
		sp.SetStatus(codes.Error, in.Err.Error())
	case in.Panicked:
		sp.SetStatus(codes.Error, "the write callback panicked")
	}
	sp.End(trace.WithTimestamp(now))
}

func commitErrorType(in leasefence.CommitInfo) string {
	if in.Panicked {
		return ErrorWritePanicked
	}
	return errorType(in.Err)
}

func (h *hooks) gateAdmit(in leasefence.AdmitInfo) {
	attrs := append(tokenAttrs(in.Token), FenceFloor.Int64(int64(in.Floor.Fence)))
	if in.Floor.Holder != "" {
		attrs = append(attrs, FenceFloorHolder.String(in.Floor.Holder))
	}
	// A push below the floor changes nothing and harms nothing: an outcome,
	// not an error. A token conflict means a forged or corrupted token.
	var failed error
	switch {
	case in.Raised:
		attrs = append(attrs, FenceOutcome.String(OutcomeRaised))
	case errors.Is(in.Err, leasefence.ErrStaleFence):
		attrs = append(attrs, FenceOutcome.String(OutcomeBelowFloor))
	case in.Err != nil:
		failed = in.Err
		attrs = append(attrs, FenceOutcome.String(OutcomeRefused), ErrorType.String(errorType(in.Err)))
	default:
		attrs = append(attrs, FenceOutcome.String(OutcomeUnchanged))
	}
	_, sp := h.tracer.Start(noParent, SpanFenceAdmit, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	if failed != nil {
		sp.RecordError(failed)
		sp.SetStatus(codes.Error, failed.Error())
	}
	sp.End()
}

// errorType names a leasefence error by its sentinel, and any other error
// by its Go type, as the error.type convention asks.
func errorType(err error) string {
	for _, s := range []struct {
		sentinel error
		name     string
	}{
		{leasefence.ErrStaleFence, ErrorStaleFence},
		{leasefence.ErrTokenConflict, ErrorTokenConflict},
		{leasefence.ErrUnknownRequest, "unknown_request"},
		{leasefence.ErrRequestUsed, "request_used"},
		{leasefence.ErrGrantMismatch, "grant_mismatch"},
		{leasefence.ErrWrongResource, "wrong_resource"},
		{leasefence.ErrInvalidRequest, "invalid_request"},
		{leasefence.ErrClockBackwards, "clock_backwards"},
		{leasefence.ErrClockDomain, "clock_domain"},
	} {
		if errors.Is(err, s.sentinel) {
			return s.name
		}
	}
	return fmt.Sprintf("%T", err)
}
