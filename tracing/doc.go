// Package tracing turns leasefence's observation hooks and the harness's
// simulation events into OpenTelemetry traces. The library itself never
// imports OpenTelemetry: everything here sits on the hooks in
// leasefence/trace.go and on harness.Subscriber.
//
// # Two ways in
//
//   - SimRecorder is a harness.Subscriber. It records a simulated run as one
//     trace per lease generation (a resource, a fence and the coordinator
//     incarnation that minted it): a root span "lease" from the acquire's
//     send to the last thing that happened under that fence, with children
//     "lease acquire", "lease renew", "lease release" and "fence commit",
//     and span events for instants (checks, stalls, expiry, pushes). A
//     refused commit is an error span linked to the "lease" span of the
//     holder that raised the floor. Every timestamp is t0 plus the
//     simulated instant, so a run recorded now is found by a time-window
//     search now; with NewIDGenerator the same scenario, seed and t0 give
//     the same trace and span ids.
//   - NewHooks returns leasefence hook structs that emit the same span names
//     and attributes, in wall time, for a Coordinator, Client or FenceGate
//     in production.
//
// Setup builds an SDK TracerProvider with an exporter chosen by
// ParseExporter (OTLP over HTTP or gRPC, a file of OTLP-JSON lines, or
// nothing) and counts the spans it could not deliver.
//
// # What it does not do
//
// The hooks carry no context.Context, so spans from NewHooks are roots: they
// are not parented under a caller's request span, and the "lease" root and
// the link from a refused commit to the newer holder exist only in simulated
// runs, where one observer sees the whole system. Tracing never changes a
// run: a SimRecorder only reads events, and a collector that is down or slow
// costs dropped spans (counted by Pipeline.Dropped), never a blocked or
// failed run.
package tracing
