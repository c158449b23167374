package leaseotel

import (
	"go.opentelemetry.io/otel"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span and metric this
// package makes: its import path.
const ScopeName = "github.com/leasefence/lab/leasefence/leaseotel"

// config is what the options set. It is unexported so options can be added
// without breaking callers.
type config struct {
	provider trace.TracerProvider
}

// Option configures NewHooks and NewService.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTracerProvider makes spans with tp instead of the global provider
// (otel.GetTracerProvider at the time the hooks or service are made). A
// nil tp is ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.provider = tp
		}
	})
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if c.provider == nil {
		c.provider = otel.GetTracerProvider()
	}
	return c
}

func (c config) tracer() trace.Tracer {
	return c.provider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
}

// TracerProvider is the provider opts choose: the one given by
// WithTracerProvider, else the global one at the time of the call. It is
// for instrumentation built beside this package's (the lab's recorder)
// that takes the same options.
func TracerProvider(opts ...Option) trace.TracerProvider {
	return newConfig(opts).provider
}
