package tracing

import (
	"context"
	"path/filepath"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/harness"
)

// BenchmarkCrowdTracing measures what tracing costs a run of the "crowd"
// built-in (50 agents, 5 resources, 2 virtual minutes, both modes, about
// 11,400 spans and 26,000 span events):
//
//   - off: the run alone;
//   - recorder: with a SimRecorder on an SDK provider that exports nothing
//     (the cost of making the spans), Close included;
//   - file: with a SimRecorder on a Setup pipeline writing OTLP-JSON to a
//     file, Close and Shutdown (the flush) included: what `lab run crowd
//     --trace file=...` pays;
//   - sdk-file: no run and no recorder, only the spans of one such run made
//     again through the SDK into the same file pipeline: the part of
//     "file" that is the SDK's and the exporter's.
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
	filePipeline := func(b *testing.B) *Pipeline {
		p, err := Setup(ctx, Config{Exporter: ExporterFile, Path: filepath.Join(b.TempDir(), "crowd.jsonl")})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	shutdown := func(b *testing.B, p *Pipeline) {
		if err := p.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		if n := p.Dropped(); n != 0 {
			b.Fatalf("%d spans dropped", n)
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
		for b.Loop() {
			p := filePipeline(b)
			rec := NewSimRecorder(sc, t0, WithTracerProvider(p.TracerProvider()))
			run(b, rec)
			rec.Close()
			shutdown(b, p)
		}
	})
	b.Run("sdk-file", func(b *testing.B) {
		spans, _ := recordRun(b, sc, t0)
		for b.Loop() {
			p := filePipeline(b)
			replay(p.TracerProvider().Tracer(ScopeName), spans)
			shutdown(b, p)
		}
	})
}

// replay makes spans again through tr, with their names, kinds, parents,
// times, attributes, events, links and status: every lease root first,
// then each child, then the roots' events and ends.
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
		if st := s.Status(); st.Code != 0 {
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
