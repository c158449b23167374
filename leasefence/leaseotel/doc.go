// Package leaseotel is the leasefence library's OpenTelemetry
// instrumentation: spans and metrics for a production Coordinator, Client,
// FenceGate and Session, and a Service wrapper that makes each call a span
// inside the caller's trace. It uses the OpenTelemetry API alone
// (go.opentelemetry.io/otel, its trace and metric packages) and takes your
// TracerProvider or MeterProvider, the global ones by default: importing it
// links neither the SDK nor an exporter nor gRPC. The library itself never
// imports OpenTelemetry: everything here sits on the hooks of
// leasefence/trace.go, which cost a nil check when unset.
//
//	hooks := leaseotel.NewHooks(leaseotel.WithTracerProvider(tp))
//	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clk, TTL: 30 * time.Second, Trace: hooks.Coordinator})
//	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clk, Holder: "worker-7", Trace: hooks.Client})
//	gate := leasefence.NewFenceGate("deploy-slot", leasefence.WithGateTrace(hooks.Gate))
//	svc := leaseotel.NewService(etcdCoordinator, leaseotel.WithTracerProvider(tp)) // any leasefence.Service
//	metrics, err := leaseotel.NewMetricHooks(mp)
//
// Three ways in:
//
//   - NewHooks fills the hook structs with spans, in wall time: "lease
//     acquire", "lease renew", "lease release" (server spans at the
//     coordinator, client spans at the holder), "fence commit" and "fence
//     admit" at the gate. The hooks carry no context, so each span is a
//     root that carries the resource, holder and fence itself.
//   - NewService wraps any leasefence.Service (the in-memory coordinator,
//     etcdlease, redislease) so that each call is a client span under the
//     caller's context: a holder's acquire shows up inside the request that
//     made it.
//   - NewMetricHooks fills the same hook structs with metrics through a
//     MeterProvider: acquires, renewals, leases held and lost, request
//     latencies, commits, refusals, the gate's floor and ended sessions.
//
// The span names and attribute keys (SpanLeaseAcquire, LeaseResource,
// FenceOutcome, ...) are the ones the lab's traces of simulated runs use,
// so a production trace and a lab trace read alike. The lab's own
// recorder, which turns a run's history into traces, is the lab's package
// tracing; it builds on this one.
package leaseotel
