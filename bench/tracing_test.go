package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tracing"
	"github.com/leasefence/lab/tracing/otelexport"
)

// BenchmarkCrowdTracing measures what tracing costs a run of the crowd
// built-in (50 agents, 5 resources, 2 virtual minutes, both modes):
//
//   - trace=off: the run alone, the baseline;
//   - trace=recorder: with a Recorder on an SDK provider that exports
//     nothing (the cost of making the spans);
//   - trace=file: what `lab run crowd --trace file=PATH` pays: Setup of
//     the file pipeline, the run with a Recorder, Close, and Shutdown,
//     which flushes every span to the file;
//   - trace=sdk-file: no run and no recorder, only the spans of one traced
//     run made again through the SDK into the same file pipeline: the part
//     of trace=file that is the SDK's and the exporter's.
//
// The traced cases report x-off, their time per run over the mean time per
// run of trace=off, measured just before them (when -bench selects it).
func BenchmarkCrowdTracing(b *testing.B) {
	sc, ok := spec.Builtin("crowd")
	if !ok {
		b.Fatal("no built-in scenario crowd")
	}
	ctx := context.Background()
	run := func(b *testing.B, subs ...history.Subscriber) {
		if _, err := harness.Run(ctx, sc, harness.RunOptions{Subscribers: subs}); err != nil {
			b.Fatal(err)
		}
	}
	// Every trace=off run so far: with -count, go test runs all the off
	// cases before the traced ones, so each ratio is against all of them.
	var offTime time.Duration
	var offRuns int
	ratio := func(b *testing.B) {
		if offRuns > 0 {
			off := float64(offTime) / float64(offRuns)
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/off, "x-off")
		}
	}
	b.Run("trace=off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run(b)
		}
		offTime += b.Elapsed()
		offRuns += b.N
	})
	b.Run("trace=recorder", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.NewIDGenerator()))
		b.Cleanup(func() { _ = tp.Shutdown(ctx) })
		b.ReportAllocs()
		for b.Loop() {
			rec := tracing.NewRecorder(sc.Header(harness.Modes), time.Now(), tracing.WithTracerProvider(tp))
			run(b, rec)
			rec.Close()
		}
		ratio(b)
	})
	filePipeline := func(b *testing.B) *otelexport.Pipeline {
		cfg, err := otelexport.ParseExporter("file=" + filepath.Join(b.TempDir(), "crowd.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		p, err := otelexport.Setup(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	shutdown := func(b *testing.B, p *otelexport.Pipeline) {
		if err := p.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		if n := p.Dropped(); n != 0 {
			b.Fatalf("%d spans dropped", n)
		}
	}
	b.Run("trace=file", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := filePipeline(b)
			rec := tracing.NewRecorder(sc.Header(harness.Modes), time.Now(), tracing.WithTracerProvider(p.TracerProvider()))
			run(b, rec)
			rec.Close()
			shutdown(b, p)
		}
		ratio(b)
	})
	b.Run("trace=sdk-file", func(b *testing.B) {
		spans := tracedSpans(b, sc)
		b.ReportAllocs()
		for b.Loop() {
			p := filePipeline(b)
			replay(p.TracerProvider().Tracer(tracing.ScopeName), spans)
			shutdown(b, p)
		}
		ratio(b)
	})
}

// tracedSpans records a run of sc and returns its spans, all ended.
func tracedSpans(b *testing.B, sc spec.Scenario) []sdktrace.ReadOnlySpan {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithIDGenerator(tracing.NewIDGenerator()))
	rec := tracing.NewRecorder(sc.Header(harness.Modes), time.Now(), tracing.WithTracerProvider(tp))
	if _, err := harness.Run(context.Background(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}}); err != nil {
		b.Fatal(err)
	}
	rec.Close()
	if started, ended := len(sr.Started()), len(sr.Ended()); started != ended || ended == 0 {
		b.Fatalf("%d spans started, %d ended", started, ended)
	}
	return sr.Ended()
}

// replay makes spans again through tr, with their names, kinds, parents,
// times, attributes, events, links and status: every root first, then each
// child, then the roots' events and ends (the order a recorder makes them
// in: a root stays open while its children come and go).
func replay(tr trace.Tracer, spans []sdktrace.ReadOnlySpan) {
	type open struct {
		ctx  context.Context
		span trace.Span
	}
	roots := map[trace.SpanID]open{}
	var opts []trace.SpanStartOption
	start := func(parent context.Context, s sdktrace.ReadOnlySpan) (context.Context, trace.Span) {
		opts = append(opts[:0], trace.WithTimestamp(s.StartTime()), trace.WithSpanKind(s.SpanKind()))
		if links := s.Links(); len(links) > 0 {
			ls := make([]trace.Link, len(links))
			for i, l := range links {
				ls[i] = trace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes}
			}
			opts = append(opts, trace.WithLinks(ls...))
		}
		ctx, sp := tr.Start(parent, s.Name(), opts...)
		sp.SetAttributes(s.Attributes()...)
		return ctx, sp
	}
	end := func(sp trace.Span, s sdktrace.ReadOnlySpan) {
		for _, e := range s.Events() {
			sp.AddEvent(e.Name, trace.WithTimestamp(e.Time), trace.WithAttributes(e.Attributes...))
		}
		if st := s.Status(); st.Code != codes.Unset {
			sp.SetStatus(st.Code, st.Description)
		}
		sp.End(trace.WithTimestamp(s.EndTime()))
	}
	for _, s := range spans {
		if !s.Parent().IsValid() {
			ctx, sp := start(context.Background(), s)
			roots[s.SpanContext().SpanID()] = open{ctx, sp}
		}
	}
	for _, s := range spans {
		if r, ok := roots[s.Parent().SpanID()]; ok && s.Parent().IsValid() {
			_, sp := start(r.ctx, s)
			end(sp, s)
		}
	}
	for _, s := range spans {
		if r, ok := roots[s.SpanContext().SpanID()]; ok {
			end(r.span, s)
		}
	}
}
