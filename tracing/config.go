package tracing

import (
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/leasefence/leaseotel"
)

// ScopeName is the instrumentation scope of every span this package makes:
// its import path.
const ScopeName = "github.com/leasefence/lab/tracing"

// Option configures a Recorder. It is leaseotel's: the same options
// configure the library's hooks and the lab's recorder.
type Option = leaseotel.Option

// WithTracerProvider makes spans with tp instead of the global provider
// (otel.GetTracerProvider at the time the recorder is made). A nil tp is
// ignored. For reproducible ids in simulated runs, build tp with
// sdktrace.WithIDGenerator(NewIDGenerator()); otelexport.Setup's provider
// does.
func WithTracerProvider(tp trace.TracerProvider) Option { return leaseotel.WithTracerProvider(tp) }

// tracer is the recorder's tracer from the provider opts choose.
func tracer(opts []Option) trace.Tracer {
	return leaseotel.TracerProvider(opts...).Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
}
