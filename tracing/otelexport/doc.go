// Package otelexport is the export pipeline of package tracing: it builds
// the OpenTelemetry SDK TracerProvider that tracing's Recorder and hooks
// are given, wired to an exporter chosen by ParseExporter: OTLP over HTTP
// or gRPC (configured by the standard OTEL_* variables), a file of
// OTLP-JSON lines, or nothing.
//
// It is apart from package tracing so that a program that only
// instruments, and brings its own provider, links the OpenTelemetry API
// alone: no SDK, no gRPC.
//
// A collector that is down or slow never fails or delays a run, whatever
// the protocol: an export that fails is not retried, its spans are counted
// as undelivered (Pipeline.Dropped, with the first error in ExportErr),
// and the exports of the next ExportTimeout are skipped and counted too.
// A collector that refuses the connection costs nothing; one that never
// answers costs about one ExportTimeout.
//
// Typical use, as cmd/lab does it:
//
//	cfg, err := otelexport.ParseExporter(flagValue)
//	...
//	h := sc.Header(modes) // or the real-time runner's, or a history file's
//	cfg.Attributes = tracing.RunAttributes(h)
//	p, err := otelexport.Setup(ctx, cfg)
//	...
//	rec := tracing.NewRecorder(h, time.Now(), tracing.WithTracerProvider(p.TracerProvider()))
//	// run, then:
//	rec.Close()
//	err = p.Shutdown(ctx) // flushes; p.Dropped() says what did not arrive
package otelexport
