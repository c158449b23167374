package otelexport

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/tracing"
)

// fileEncoders are the two ways to write OTLP-JSON lines to a file.
var fileEncoders = []struct {
	name string
	open func(ctx context.Context, path string) (sdktrace.SpanExporter, error)
}{
	{"hand", func(_ context.Context, path string) (sdktrace.SpanExporter, error) { return newFileExporter(path) }},
	{"sdk", func(ctx context.Context, path string) (sdktrace.SpanExporter, error) {
		return newJSONFileExporter(ctx, path)
	}},
}

// BenchmarkFileExporter writes the spans of one traced crowd run (50
// agents, 5 resources, 2 virtual minutes, both modes) to a file in batches
// of 512, the batch processor's default, with each encoder: the
// hand-written one (encoder=hand) and the SDK's OTLP/HTTP exporter in its
// JSON encoding writing its requests to the file (encoder=sdk). ns/span is
// the time per span written.
func BenchmarkFileExporter(b *testing.B) {
	spans, _ := recordRun(b, builtin(b, "crowd"), t0)
	ctx := context.Background()
	for _, enc := range fileEncoders {
		b.Run("encoder="+enc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "traces.jsonl")
			b.ReportAllocs()
			for b.Loop() {
				exp, err := enc.open(ctx, path)
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(spans); i += 512 {
					if err := exp.ExportSpans(ctx, spans[i:min(i+512, len(spans))]); err != nil {
						b.Fatal(err)
					}
				}
				if err := exp.Shutdown(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(spans)), "ns/span")
			b.ReportMetric(float64(len(spans)), "spans")
		})
	}
}

// BenchmarkFileTrace is what `lab run crowd --trace file=PATH` pays with
// each encoder: the crowd run with a Recorder on an SDK provider whose
// blocking batch processor feeds the file exporter, and the shutdown that
// flushes it; trace=off is the run alone, the baseline, in the same run of
// the benchmark.
func BenchmarkFileTrace(b *testing.B) {
	sc := builtin(b, "crowd")
	h := sc.Header(harness.Modes)
	ctx := context.Background()
	b.Run("trace=off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := harness.Run(ctx, sc, harness.RunOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, enc := range fileEncoders {
		b.Run("trace=file/encoder="+enc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "traces.jsonl")
			b.ReportAllocs()
			for b.Loop() {
				exp, err := enc.open(ctx, path)
				if err != nil {
					b.Fatal(err)
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.NewIDGenerator()),
					sdktrace.WithBatcher(exp, sdktrace.WithBlocking(), sdktrace.WithBatchTimeout(time.Second)))
				rec := tracing.NewRecorder(h, time.Now(), tracing.WithTracerProvider(tp))
				if _, err := harness.Run(ctx, sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}}); err != nil {
					b.Fatal(err)
				}
				rec.CloseAt(sc.Duration)
				if err := tp.Shutdown(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The alternative the benchmarks measure the hand-written encoder against.
//
// jsonFileExporter is the SDK's OTLP/HTTP exporter in its JSON encoding,
// with each request it would send written as one line of a file instead:
// an ExportTraceServiceRequest in the OTLP specification's JSON encoding,
// the format the OpenTelemetry Collector's file exporter writes and its
// otlpjsonfile receiver reads. The encoding is the SDK's own, so it follows
// the SDK's releases; only the transport is ours.
type jsonFileExporter struct {
	sdktrace.SpanExporter
	file *fileTransport
}

// fileTransport is the exporter's HTTP transport: it writes each request's
// body as a line and answers 200 OK. It never dials.
type fileTransport struct {
	mu  sync.Mutex
	f   *os.File // nil once closed
	buf []byte
}

// fileEndpoint is the URL the exporter believes it posts to.
const fileEndpoint = "http://otlp-json-file.invalid/v1/traces"

func newJSONFileExporter(ctx context.Context, path string) (*jsonFileExporter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	t := &fileTransport{f: f}
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON),
		otlptracehttp.WithEndpointURL(fileEndpoint),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: t}),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &jsonFileExporter{SpanExporter: exp, file: t}, nil
}

// Shutdown shuts the exporter down, then closes the file.
func (e *jsonFileExporter) Shutdown(ctx context.Context) error {
	err := e.SpanExporter.Shutdown(ctx)
	return errors.Join(err, e.file.close())
}

var _ sdktrace.SpanExporter = (*jsonFileExporter)(nil)

func (t *fileTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	defer r.Body.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return nil, errFileClosed
	}
	buf := bytes.NewBuffer(t.buf[:0])
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	t.buf = buf.Bytes()
	if _, err := t.f.Write(t.buf); err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: http.NoBody,
		Header: http.Header{}, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

func (t *fileTransport) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}
