package tracing_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/leaseotel"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tracing"
)

// Recording a simulated run: one trace per lease generation, its "lease"
// span naming the holder and the fence, its children the acquire and the
// writes; timestamps are t0 plus the simulated instants. An act that took
// no time (here every acquire, answered at once, and agent-2's write at
// the instant of its check) is an event on the "lease" span instead. The
// provider otelexport.Setup builds would export them.
func ExampleNewRecorder() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithIDGenerator(tracing.NewIDGenerator()))
	sc, _ := spec.Builtin("gap")
	t0 := time.Now()
	rec := tracing.NewRecorder(sc.Header(harness.Modes), t0, tracing.WithTracerProvider(tp))
	_, _ = harness.Run(context.Background(), sc, harness.RunOptions{Modes: []history.Mode{history.Fenced}, Subscribers: []history.Subscriber{rec}})
	rec.Close()

	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	var leases []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == leaseotel.SpanLease {
			leases = append(leases, s)
		} else {
			children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
		}
	}
	at := func(s sdktrace.ReadOnlySpan) time.Duration { return s.StartTime().Sub(t0) }
	for _, l := range leases {
		var holder string
		var fence int64
		for _, kv := range l.Attributes() {
			switch kv.Key {
			case leaseotel.LeaseHolder:
				holder = kv.Value.AsString()
			case leaseotel.LeaseFence:
				fence = kv.Value.AsInt64()
			}
		}
		fmt.Printf("lease %s fence %d, %v to %v\n", holder, fence, at(l), l.EndTime().Sub(t0))
		for _, e := range l.Events() {
			if e.Name == tracing.EventLeaseAcquire || e.Name == tracing.EventFenceCommit {
				fmt.Printf("  %-13s at %v (an event)\n", e.Name, e.Time.Sub(t0))
			}
		}
		for _, c := range children[l.SpanContext().SpanID()] {
			fmt.Printf("  %-13s %v to %v, %d links, %s\n", c.Name(), at(c), c.EndTime().Sub(t0), len(c.Links()), c.Status().Code)
		}
	}
	// Output:
	// lease agent-1 fence 1, 0s to 1.4s
	//   lease acquire at 0s (an event)
	//   fence commit  950ms to 1.4s, 1 links, Error
	// lease agent-2 fence 2, 1s to 2s
	//   lease acquire at 1s (an event)
	//   fence commit  at 1.01s (an event)
}
