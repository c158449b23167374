package tracing

import (
	"context"
	"path/filepath"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasefence/lab/harness"
)

// BenchmarkCrowdTracing measures what tracing costs a run of the "crowd"
// built-in (50 agents, 5 resources, 2 virtual minutes, both modes, about
// 18,000 spans):
//
//   - off: the run alone;
//   - recorder: with a SimRecorder on an SDK provider that exports nothing
//     (the cost of making the spans);
//   - file: with a SimRecorder on a Setup pipeline writing OTLP-JSON to a
//     file, Close and Shutdown (the flush) included: what `lab run crowd
//     --trace file=...` pays.
//
// Compare them with benchstat; file/off is the cost of tracing.
func BenchmarkCrowdTracing(b *testing.B) {
	sc := builtin(b, "crowd")
	ctx := context.Background()
	run := func(b *testing.B, subs ...harness.Subscriber) {
		if _, err := harness.Run(ctx, sc, harness.RunOptions{Subscribers: subs}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("off", func(b *testing.B) {
		for b.Loop() {
			run(b)
		}
	})
	b.Run("recorder", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(NewIDGenerator()))
		for b.Loop() {
			rec := NewSimRecorder(sc, t0, WithTracerProvider(tp))
			run(b, rec)
			rec.Close()
		}
	})
	b.Run("file", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "crowd.jsonl")
		for b.Loop() {
			p, err := Setup(ctx, Config{Exporter: ExporterFile, Path: path})
			if err != nil {
				b.Fatal(err)
			}
			rec := NewSimRecorder(sc, t0, WithTracerProvider(p.TracerProvider()))
			run(b, rec)
			rec.Close()
			if err := p.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			if n := p.Dropped(); n != 0 {
				b.Fatalf("%d spans dropped", n)
			}
		}
	})
}
