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

// Tracing a production coordinator, client and gate: set the hooks in their
// options. Here the spans go to an in-memory recorder; in a service, pass
// the TracerProvider your exporter feeds (or none, for the global one).
func ExampleHooks() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	hooks := leaseotel.NewHooks(leaseotel.WithTracerProvider(tp))

	clock := leasefence.NewManualClock("coordinator")
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second, Trace: hooks.Coordinator})
	a, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "agent-a", Trace: hooks.Client})
	b, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "agent-b", Trace: hooks.Client})
	gate := leasefence.NewFenceGate("deploy-slot", leasefence.WithGateTrace(hooks.Gate))
	write := func(context.Context) error { return nil }
	acquire := func(c *leasefence.Client) *leasefence.Lease {
		req, _ := c.BeginAcquire("deploy-slot")
		out, _ := coord.Acquire(req)
		lease, _ := c.CompleteAcquire(req, out.Grant)
		return lease
	}

	leaseA := acquire(a)
	clock.Advance(time.Second) // agent-a stalls past its TTL
	leaseB := acquire(b)
	_ = gate.Commit(context.Background(), leaseB.Token, write)
	_ = gate.Commit(context.Background(), leaseA.Token, write) // refused: stale fence

	for _, s := range spans.Ended() {
		outcome := leaseotel.LeaseOutcome
		if s.Name() == leaseotel.SpanFenceCommit {
			outcome = leaseotel.FenceOutcome
		}
		var value string
		for _, kv := range s.Attributes() {
			if kv.Key == outcome {
				value = kv.Value.AsString()
			}
		}
		fmt.Printf("%-13s %-6s %-8s %s\n", s.Name(), s.SpanKind(), value, s.Status().Code)
	}
	// Output:
	// lease acquire server granted  Unset
	// lease acquire client granted  Unset
	// lease acquire server granted  Unset
	// lease acquire client granted  Unset
	// fence commit  internal admitted Unset
	// fence commit  internal refused  Error
}
