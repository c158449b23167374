// Package tracing turns a lab run's history into OpenTelemetry traces. It
// sits on package history (a Header and its events, read through a
// history.Reader); it knows no runner, so a simulated run, a real-time run
// and a history file read back are traced alike.
//
// # What it records
//
//   - Recorder is a subscriber of a run's events. It records a run as one
//     trace per lease generation (a resource, a fence and the coordinator
//     incarnation that minted it): a root span "lease" from the acquire's
//     send to the last thing that happened under that fence, which carries
//     the resource, holder and fence, with children "lease acquire",
//     "lease renew", "lease release" and "fence commit" (from the
//     holder's check to the gate's answer), and span events for instants
//     (checks, stalls, expiry, pushes, and an acquire or a write that took
//     no time: no span has zero length). An acquire refused
//     because the lease was held is an "acquire denied" event on the
//     holder's "lease" span, not a trace of its own. A refused commit is an
//     error span linked to the "lease" span of the holder that raised the
//     floor. Every timestamp is t0 plus the run's instant, so a run
//     recorded now is found by a time-window search now; with
//     NewIDGenerator the same scenario and seed give the same trace and
//     span ids whenever the run is recorded (a real-time run's ids also
//     depend on its start). The spans are made on the recorder's own goroutine, beside
//     the run rather than in it.
//   - For a production Coordinator, Client, FenceGate or Service, the
//     library's own instrumentation is the module leasefence/leaseotel
//     (NewHooks, NewService, NewMetricHooks), with the OpenTelemetry API
//     alone. Its span names and attribute keys are the ones this package
//     records (leaseotel.SpanLeaseAcquire, leaseotel.LeaseResource, ...);
//     this package adds the keys and events only a run has (SimMode,
//     EventStallBegan, ...).
//
// # Instrumenting apart from exporting
//
// This package uses the OpenTelemetry API alone (go.opentelemetry.io/otel,
// its trace and attribute packages): a Recorder takes a
// trace.TracerProvider (WithTracerProvider, the global provider by
// default), never an exporter, so importing it links neither the SDK nor
// gRPC. IDGenerator, the SDK id generator that gives a Recorder's spans
// their derived ids, is written on the API's types for the same reason.
// The export pipeline, which builds an SDK provider wired to OTLP over
// HTTP or gRPC or to a file of OTLP-JSON lines and counts the spans it
// could not deliver, is package tracing/otelexport.
//
// # What it does not do
//
// The "lease" root and the link from a refused commit to the newer holder
// exist only in traces made from a history, where one observer sees the
// whole system; leaseotel's hooks carry no context, so their spans are
// roots. Tracing never changes a run: a Recorder only reads events, and a
// collector that is down or slow costs dropped spans (counted by
// otelexport's Pipeline.Dropped), never a blocked or failed run. It is not
// free: the SDK makes, snapshots and exports every span, and on the "crowd" scenario that costs more than the simulation
// itself (BenchmarkCrowdTracing in package bench measures it).
package tracing
