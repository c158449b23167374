package leaseotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/leasefence"
)

// NewService wraps svc so that every call is a client span, a child of the
// span in the caller's ctx, in the manner of otelhttp's transport: a
// production acquire shows up inside the request that made it. The span's
// context is what svc is called with, so spans svc makes (an etcd client's
// RPCs) are its children in turn.
//
//   - "lease acquire", "lease renew", "lease release", with the token's
//     attributes, the request id, and the answer: lease.outcome (granted,
//     denied, renewed, released, refused), lease.reason, lease.held_by and
//     lease.retry_after_ms, lease.ttl_ms.
//   - No answer (svc's error: network, store, ctx) sets status Error with
//     error.type. A refused renewal sets status Error with error.type
//     lease_lost, since the caller has lost its lease; a denied acquire or a
//     refused release is an answer, not a failure, and leaves the status
//     unset.
//
// Spans are made with the options' tracer provider, the global one by
// default. NewService(nil) returns a Service whose calls fail with
// leasefence.ErrInvalidRequest. A nil ctx is passed to svc without a span.
func NewService(svc leasefence.Service, opts ...Option) leasefence.Service {
	return &tracedService{svc: svc, tracer: newConfig(opts).tracer()}
}

type tracedService struct {
	svc    leasefence.Service
	tracer trace.Tracer
}

var errNilService = fmt.Errorf("%w: leaseotel.NewService(nil)", leasefence.ErrInvalidRequest)

func (s *tracedService) start(ctx context.Context, name string, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func (s *tracedService) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	if s.svc == nil {
		return leasefence.AcquireOutcome{}, errNilService
	}
	if ctx == nil {
		return s.svc.Acquire(ctx, req)
	}
	ctx, sp := s.start(ctx, SpanLeaseAcquire, []attribute.KeyValue{
		LeaseResource.String(req.Resource), LeaseHolder.String(req.Holder), LeaseRequestID.String(req.RequestID),
	})
	defer sp.End()
	out, err := s.svc.Acquire(ctx, req)
	switch {
	case err != nil:
		noAnswer(sp, err)
	case out.OK:
		sp.SetAttributes(LeaseOutcome.String(OutcomeGranted), LeaseFence.Int64(int64(out.Grant.Token.Fence)),
			LeaseTTL.Int64(out.Grant.TTL.Milliseconds()))
	default:
		sp.SetAttributes(LeaseOutcome.String(OutcomeDenied), LeaseReason.String(string(out.Reason)))
		if out.HeldBy != "" {
			sp.SetAttributes(LeaseHeldBy.String(out.HeldBy), LeaseRetryAfter.Int64(out.RetryAfter.Milliseconds()))
		}
	}
	return out, err
}

func (s *tracedService) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	if s.svc == nil {
		return leasefence.RenewOutcome{}, errNilService
	}
	if ctx == nil {
		return s.svc.Renew(ctx, req)
	}
	ctx, sp := s.start(ctx, SpanLeaseRenew, append(tokenAttrs(req.Token), LeaseRequestID.String(req.RequestID)))
	defer sp.End()
	out, err := s.svc.Renew(ctx, req)
	switch {
	case err != nil:
		noAnswer(sp, err)
	case out.OK:
		sp.SetAttributes(LeaseOutcome.String(OutcomeRenewed), LeaseTTL.Int64(out.Grant.TTL.Milliseconds()))
	default:
		sp.SetAttributes(LeaseOutcome.String(OutcomeRefused), LeaseReason.String(string(out.Reason)), ErrorType.String(ErrorLeaseLost))
		sp.SetStatus(codes.Error, "renewal refused: "+string(out.Reason))
	}
	return out, err
}

func (s *tracedService) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	if s.svc == nil {
		return leasefence.ReleaseOutcome{}, errNilService
	}
	if ctx == nil {
		return s.svc.Release(ctx, t)
	}
	ctx, sp := s.start(ctx, SpanLeaseRelease, tokenAttrs(t))
	defer sp.End()
	out, err := s.svc.Release(ctx, t)
	switch {
	case err != nil:
		noAnswer(sp, err)
	case out.OK:
		sp.SetAttributes(LeaseOutcome.String(OutcomeReleased))
	default:
		sp.SetAttributes(LeaseOutcome.String(OutcomeRefused), LeaseReason.String(string(out.Reason)))
	}
	return out, err
}

// noAnswer marks a call that got no answer. RecordError does not set the
// status, so both are done.
func noAnswer(sp trace.Span, err error) {
	kind := errorType(err)
	switch {
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		kind = "deadline_exceeded"
	}
	sp.SetAttributes(ErrorType.String(kind))
	sp.RecordError(err)
	sp.SetStatus(codes.Error, err.Error())
}
