package leaseotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leaseotel"
)

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// spanCtxService records the span context it was called with.
type spanCtxService struct {
	leasefence.Service
	seen []trace.SpanContext
}

func (s *spanCtxService) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	s.seen = append(s.seen, trace.SpanContextFromContext(ctx))
	return s.Service.Acquire(ctx, req)
}

type failing struct{ leasefence.Service }

func (failing) Acquire(context.Context, leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	return leasefence.AcquireOutcome{}, context.DeadlineExceeded
}

func TestServiceSpansAreChildrenOfTheCallersSpan(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	clock := leasefence.NewManualClock("coordinator")
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	inner := &spanCtxService{Service: leasefence.Local(coord)}
	svc := leaseotel.NewService(inner, leaseotel.WithTracerProvider(tp))
	a, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "agent-a"})
	b, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "agent-b"})

	ctx, parent := tp.Tracer("test").Start(t.Context(), "handle request")
	reqA, _ := a.BeginAcquire("r")
	outA, err := svc.Acquire(ctx, reqA)
	if err != nil || !outA.OK {
		t.Fatalf("Acquire = %+v, %v", outA, err)
	}
	reqB, _ := b.BeginAcquire("r")
	if out, _ := svc.Acquire(ctx, reqB); out.OK {
		t.Fatal("second holder granted")
	}
	renew, _ := b.BeginRenewal(&leasefence.Lease{Token: leasefence.Token{Resource: "r", Holder: "agent-b", Fence: 9}})
	if out, _ := svc.Renew(ctx, renew); out.OK {
		t.Fatal("forged renewal granted")
	}
	if out, _ := svc.Release(ctx, outA.Grant.Token); !out.OK {
		t.Fatal("release refused")
	}
	if _, err := leaseotel.NewService(failing{}, leaseotel.WithTracerProvider(tp)).Acquire(ctx, reqB); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("failing Acquire = %v", err)
	}
	parent.End()

	ended := spans.Ended()
	if len(ended) != 6 {
		t.Fatalf("%d spans, want 6", len(ended))
	}
	for _, s := range ended[:5] {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %q is not a child of the caller's span", s.Name())
		}
		if s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
		}
	}
	// The wrapped service is called inside the span.
	if inner.seen[0].SpanID() != ended[0].SpanContext().SpanID() {
		t.Error("the wrapped service was not called with the span's context")
	}
	tests := []struct {
		name    string
		outcome string
		reason  string
		status  codes.Code
		errType string
	}{
		{leaseotel.SpanLeaseAcquire, leaseotel.OutcomeGranted, "", codes.Unset, ""},
		{leaseotel.SpanLeaseAcquire, leaseotel.OutcomeDenied, "held", codes.Unset, ""},
		{leaseotel.SpanLeaseRenew, leaseotel.OutcomeRefused, "unknown", codes.Error, leaseotel.ErrorLeaseLost},
		{leaseotel.SpanLeaseRelease, leaseotel.OutcomeReleased, "", codes.Unset, ""},
		{leaseotel.SpanLeaseAcquire, "", "", codes.Error, "deadline_exceeded"},
	}
	for i, tt := range tests {
		s := ended[i]
		outcome, _ := attrOf(s, leaseotel.LeaseOutcome)
		reason, _ := attrOf(s, leaseotel.LeaseReason)
		errType, _ := attrOf(s, leaseotel.ErrorType)
		if s.Name() != tt.name || outcome.AsString() != tt.outcome || reason.AsString() != tt.reason ||
			s.Status().Code != tt.status || errType.AsString() != tt.errType {
			t.Errorf("span %d: %q outcome %q reason %q status %v error.type %q; want %+v",
				i, s.Name(), outcome.AsString(), reason.AsString(), s.Status().Code, errType.AsString(), tt)
		}
	}
	if fence, ok := attrOf(ended[0], leaseotel.LeaseFence); !ok || fence.AsInt64() != int64(outA.Grant.Token.Fence) {
		t.Errorf("granted span fence = %v", fence)
	}
	if held, ok := attrOf(ended[1], leaseotel.LeaseHeldBy); !ok || held.AsString() != "agent-a" {
		t.Errorf("denied span held_by = %v", held)
	}
	if len(ended[4].Events()) == 0 {
		t.Error("no error event on a call without an answer")
	}
}

func TestServiceNilArguments(t *testing.T) {
	svc := leaseotel.NewService(nil)
	if _, err := svc.Acquire(t.Context(), leasefence.AcquireRequest{}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("NewService(nil).Acquire = %v", err)
	}
	if _, err := svc.Renew(t.Context(), leasefence.RenewRequest{}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("NewService(nil).Renew = %v", err)
	}
	if _, err := svc.Release(t.Context(), leasefence.Token{}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("NewService(nil).Release = %v", err)
	}
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewManualClock("c"), TTL: time.Second})
	var nilCtx context.Context
	wrapped := leaseotel.NewService(leasefence.Local(coord))
	if _, err := wrapped.Acquire(nilCtx, leasefence.AcquireRequest{}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Acquire(nil ctx) = %v", err)
	}
	if _, err := wrapped.Renew(nilCtx, leasefence.RenewRequest{}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Renew(nil ctx) = %v", err)
	}
	if _, err := wrapped.Release(nilCtx, leasefence.Token{}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("Release(nil ctx) = %v", err)
	}
}

// A production acquire inside the request that made it: wrap the Service,
// and pass the request's ctx.
func ExampleNewService() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: 10 * time.Second})
	svc := leaseotel.NewService(leasefence.Local(coord), leaseotel.WithTracerProvider(tp))
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-a"), Holder: "agent-a"})

	ctx, request := tp.Tracer("app").Start(context.Background(), "POST /deploy")
	session, _ := leasefence.Hold(ctx, svc, client, "deploy-slot", leasefence.HoldOptions{})
	_, _ = session.Release(ctx)
	request.End()

	for _, s := range spans.Ended() {
		fmt.Printf("%s (child of the request: %v)\n", s.Name(), s.Parent().SpanID() == request.SpanContext().SpanID())
	}
	// Output:
	// lease acquire (child of the request: true)
	// lease release (child of the request: true)
	// POST /deploy (child of the request: false)
}
