package leaseotel_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leaseotel"
)

// The hooks in a service, as the README shows them: the coordinator, the
// client and the gate report spans through your TracerProvider (each a
// root: the library's core takes no context), and the wrapped Service
// makes each call a span in the caller's trace. Here the
// provider records in memory; in a service it is the one your exporter
// feeds, and svc would wrap your etcdlease or redislease coordinator.
func Example_service() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	clk := leasefence.NewMonotonicClock("worker-7")

	hooks := leaseotel.NewHooks(leaseotel.WithTracerProvider(tp)) // spans; NewMetricHooks(mp) for metrics
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clk, TTL: 30 * time.Second, Trace: hooks.Coordinator})
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clk, Holder: "worker-7", Trace: hooks.Client})
	gate := leasefence.NewFenceGate("deploy-slot", leasefence.WithGateTrace(hooks.Gate))
	svc := leaseotel.NewService(leasefence.Local(coord), leaseotel.WithTracerProvider(tp)) // each call a span in the caller's trace

	ctx, request := tp.Tracer("app").Start(context.Background(), "POST /deploy")
	session, err := leasefence.Hold(ctx, svc, client, "deploy-slot", leasefence.HoldOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("commit:", gate.Commit(ctx, session.Token(), func(context.Context) error { return nil }))
	_, _ = session.Release(ctx)
	request.End()

	for _, s := range spans.Ended() {
		child := s.Parent().SpanID() == request.SpanContext().SpanID()
		fmt.Printf("%-13s %-8s child of the request: %v\n", s.Name(), s.SpanKind(), child)
	}
	// Output:
	// commit: <nil>
	// lease acquire server   child of the request: false
	// lease acquire client   child of the request: true
	// lease acquire client   child of the request: false
	// fence commit  internal child of the request: false
	// lease release server   child of the request: false
	// lease release client   child of the request: true
	// POST /deploy  internal child of the request: false
}
