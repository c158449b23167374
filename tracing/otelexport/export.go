package otelexport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasefence/lab/tracing"
)

// ExporterKind is where a Pipeline sends spans.
type ExporterKind string

// The exporters.
const (
	// ExporterNone exports nothing: the provider is a no-op.
	ExporterNone ExporterKind = "none"
	// ExporterOTLP is OTLP with the protocol OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
	// or OTEL_EXPORTER_OTLP_PROTOCOL names: http/protobuf (the default),
	// http/json or grpc.
	ExporterOTLP ExporterKind = "otlp"
	// ExporterOTLPHTTP is OTLP over HTTP (protobuf, or JSON if the protocol
	// variable says http/json).
	ExporterOTLPHTTP ExporterKind = "otlp-http"
	// ExporterOTLPGRPC is OTLP over gRPC.
	ExporterOTLPGRPC ExporterKind = "otlp-grpc"
	// ExporterFile writes OTLP-JSON to a file, one ExportTraceServiceRequest
	// per line, as the OpenTelemetry Collector's file exporter does.
	ExporterFile ExporterKind = "file"
)

// Defaults of a Config.
const (
	DefaultServiceName = "leasefence-lab"
	// DefaultQueueSize is how many ended spans wait for export before new
	// ones are dropped: a whole run of the "crowd" scenario fits.
	DefaultQueueSize = 1 << 15
	// DefaultExportTimeout bounds one export. A failed export is not
	// retried, and the next ones are skipped (and counted as dropped) for
	// as long again, so a collector that is down costs nothing and one
	// that does not answer costs about one timeout, not one per batch.
	DefaultExportTimeout = 3 * time.Second
	// DefaultHTTPEndpoint and DefaultGRPCEndpoint are used when neither the
	// Config nor OTEL_EXPORTER_OTLP_ENDPOINT (or its _TRACES_ variant) names
	// one. Plain http: the exporters' own default is https, which a local
	// collector does not speak.
	DefaultHTTPEndpoint = "http://localhost:4318"
	DefaultGRPCEndpoint = "http://localhost:4317"
)

// ErrBadExporter is wrapped by every error about an exporter's
// configuration: a bad flag value, a bad endpoint, a bad protocol variable.
var ErrBadExporter = errors.New("otelexport: bad exporter")

// Config says how Setup exports spans. The zero Config, with an Exporter,
// is a good one.
type Config struct {
	Exporter ExporterKind
	// Endpoint is the OTLP collector's URL, http://host:port; for HTTP a
	// URL without a path gets /v1/traces. Empty means the environment's
	// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, or DefaultHTTPEndpoint /
	// DefaultGRPCEndpoint.
	Endpoint string
	// Path is the file ExporterFile writes (created or truncated).
	Path string
	// ServiceName is the resource's service.name (DefaultServiceName if
	// empty). OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it,
	// as the SDK's environment rules say.
	ServiceName string
	// Attributes are more resource attributes, e.g. tracing.RunAttributes.
	Attributes []attribute.KeyValue
	// QueueSize bounds the spans waiting for export (DefaultQueueSize if
	// 0). When it is full, new spans are dropped and counted, never waited
	// for, except by ExporterFile, which waits: a file is never down.
	QueueSize int
	// ExportTimeout bounds one export (DefaultExportTimeout if 0).
	ExportTimeout time.Duration
}

// ParseExporter reads the value of a --trace flag:
//
//	none (or empty)      export nothing
//	otlp[=URL]           OTLP; protocol from OTEL_EXPORTER_OTLP_PROTOCOL (default http/protobuf)
//	otlp-http[=URL]      OTLP over HTTP, default http://localhost:4318
//	otlp-grpc[=URL]      OTLP over gRPC, default http://localhost:4317
//	file=PATH            OTLP-JSON lines in PATH
//
// Anything else is an error wrapping ErrBadExporter that lists the choices.
func ParseExporter(s string) (Config, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	kind := ExporterKind(name)
	switch kind {
	case "", ExporterNone:
		if hasArg {
			return Config{}, fmt.Errorf("%w %q: none takes no value", ErrBadExporter, s)
		}
		return Config{Exporter: ExporterNone}, nil
	case ExporterOTLP, ExporterOTLPHTTP, ExporterOTLPGRPC:
		if hasArg {
			if err := checkEndpoint(arg); err != nil {
				return Config{}, err
			}
		}
		return Config{Exporter: kind, Endpoint: arg}, nil
	case ExporterFile:
		if arg == "" {
			return Config{}, fmt.Errorf("%w %q: the file exporter needs a path: file=PATH", ErrBadExporter, s)
		}
		return Config{Exporter: ExporterFile, Path: arg}, nil
	}
	return Config{}, fmt.Errorf("%w %q: want otlp, otlp-http, otlp-grpc (each optionally =URL), file=PATH or none", ErrBadExporter, s)
}

func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: endpoint %q is not a URL like http://localhost:4318", ErrBadExporter, s)
	}
	return nil
}

// Pipeline is a TracerProvider wired to an exporter, and what it could not
// deliver.
type Pipeline struct {
	desc     string
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when exporting nothing
	counts   *deliveryCounts

	shutdownOnce sync.Once
	shutdownErr  error
}

// Setup builds a TracerProvider that exports as cfg says, with resource
// attributes service.name and cfg.Attributes (the environment's
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win), ids from
// tracing.NewIDGenerator, and a batch span processor whose queue is bounded and
// never blocks a run (except for the file exporter). It makes no
// connection: a collector that is down shows up as Dropped spans, not as
// an error here. Errors wrap ErrBadExporter when cfg or an OTLP variable is
// wrong.
func Setup(ctx context.Context, cfg Config) (*Pipeline, error) {
	if cfg.QueueSize < 0 {
		return nil, fmt.Errorf("%w: queue size must be >= 0, got %d", ErrBadExporter, cfg.QueueSize)
	}
	if cfg.ExportTimeout < 0 {
		return nil, fmt.Errorf("%w: export timeout must be >= 0, got %v", ErrBadExporter, cfg.ExportTimeout)
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.ExportTimeout == 0 {
		cfg.ExportTimeout = DefaultExportTimeout
	}
	if cfg.Endpoint != "" {
		if err := checkEndpoint(cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	kind, jsonEncoding, err := resolveProtocol(cfg.Exporter)
	if err != nil {
		return nil, err
	}
	if kind == ExporterNone {
		return &Pipeline{desc: string(ExporterNone), provider: noop.NewTracerProvider(), counts: &deliveryCounts{}}, nil
	}

	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{counts: &deliveryCounts{cooldown: cfg.ExportTimeout}}
	var exp sdktrace.SpanExporter
	switch kind {
	case ExporterOTLPHTTP:
		exp, p.desc, err = httpExporter(ctx, cfg, jsonEncoding)
	case ExporterOTLPGRPC:
		exp, p.desc, err = grpcExporter(ctx, cfg)
	case ExporterFile:
		exp, err = newFileExporter(cfg.Path)
		if err != nil {
			err = fmt.Errorf("otelexport: file exporter: %w", err)
		}
		p.desc = "file " + cfg.Path
	}
	if err != nil {
		return nil, err
	}
	bspOpts := []sdktrace.BatchSpanProcessorOption{
		sdktrace.WithMaxQueueSize(cfg.QueueSize),
		sdktrace.WithExportTimeout(cfg.ExportTimeout),
		// Short, so a paced run's traces show up while it runs.
		sdktrace.WithBatchTimeout(time.Second),
	}
	if kind == ExporterFile {
		bspOpts = append(bspOpts, sdktrace.WithBlocking())
	}
	p.sdk = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(tracing.NewIDGenerator()),
		// The counter sees every span before the batch processor may drop it.
		sdktrace.WithSpanProcessor(p.counts),
		sdktrace.WithBatcher(&countingExporter{next: exp, counts: p.counts}, bspOpts...),
	)
	p.provider = p.sdk
	return p, nil
}

// resolveProtocol turns ExporterOTLP into the exporter the protocol
// variables name, and says whether OTLP/HTTP should send JSON.
func resolveProtocol(kind ExporterKind) (ExporterKind, bool, error) {
	switch kind {
	case ExporterNone, ExporterFile, ExporterOTLPGRPC:
		return kind, false, nil
	case ExporterOTLP, ExporterOTLPHTTP:
	case "":
		return "", false, fmt.Errorf("%w: Config.Exporter is empty: want otlp, otlp-http, otlp-grpc, file or none", ErrBadExporter)
	default:
		return "", false, fmt.Errorf("%w %q: want otlp, otlp-http, otlp-grpc, file or none", ErrBadExporter, kind)
	}
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	proto := os.Getenv(name)
	if proto == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		proto = os.Getenv(name)
	}
	switch proto {
	case "", "http/protobuf":
		return ExporterOTLPHTTP, false, nil
	case "http/json":
		return ExporterOTLPHTTP, true, nil
	case "grpc":
		if kind == ExporterOTLP {
			return ExporterOTLPGRPC, false, nil
		}
		return ExporterOTLPHTTP, false, nil // otlp-http was asked for by name
	}
	return "", false, fmt.Errorf("%w: %s=%q: want http/protobuf, http/json or grpc", ErrBadExporter, name, proto)
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	attrs := append(append([]attribute.KeyValue(nil), cfg.Attributes...), semconv.ServiceName(name))
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attrs...),
		resource.WithFromEnv(), // last, so the environment wins
	)
	if err != nil {
		return nil, fmt.Errorf("otelexport: resource (check OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME): %w", err)
	}
	return res, nil
}

// envEndpoint is the endpoint variable the OTLP exporters will read, if any.
func envEndpoint() (name, value string) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(name); v != "" {
			return name, v
		}
	}
	return "", ""
}

func httpExporter(ctx context.Context, cfg Config, jsonEncoding bool) (sdktrace.SpanExporter, string, error) {
	enc := otlptracehttp.EncodingProtobuf
	if jsonEncoding {
		enc = otlptracehttp.EncodingJSON
	}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEncoding(enc),
		otlptracehttp.WithTimeout(cfg.ExportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: retryExports}),
	}
	desc := "otlp-http "
	endpoint := cfg.Endpoint
	if endpoint == "" {
		if name, v := envEndpoint(); v != "" {
			desc += v + " (" + name + ")"
		} else {
			endpoint = DefaultHTTPEndpoint
		}
	}
	if endpoint != "" {
		u := tracesURL(endpoint)
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
		desc += u
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("otelexport: OTLP/HTTP exporter: %w", err)
	}
	return exp, desc, nil
}

// tracesURL gives an endpoint without a path the OTLP/HTTP traces path, as
// OTEL_EXPORTER_OTLP_ENDPOINT is treated.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

func grpcExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, string, error) {
	opts := []otlptracegrpc.Option{
		otlptracegrpc.WithTimeout(cfg.ExportTimeout),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: retryExports}),
	}
	desc := "otlp-grpc "
	endpoint := cfg.Endpoint
	if endpoint == "" {
		if name, v := envEndpoint(); v != "" {
			desc += v + " (" + name + ")"
		} else {
			endpoint = DefaultGRPCEndpoint
		}
	}
	if endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		desc += endpoint
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("otelexport: OTLP/gRPC exporter: %w", err)
	}
	return exp, desc, nil
}

// retryExports is off: both OTLP exporters are built without retries (by
// default they retry for a minute). Retries made the protocols differ: the
// gRPC exporter retries Unavailable, which is also what a refused
// connection gives, so a collector that was down cost a run the whole
// retry time over gRPC and nothing over HTTP, which does not retry a
// refused connection. A lab run lasts seconds: a failed export's spans are
// counted as undelivered, never waited for, whatever the protocol; a
// collector that is busy for a moment loses a batch, counted the same way.
const retryExports = false

// TracerProvider returns the provider to make spans with: pass it to
// WithTracerProvider. With ExporterNone it is a no-op provider.
func (p *Pipeline) TracerProvider() trace.TracerProvider { return p.provider }

// String says where spans go, e.g. "otlp-http http://localhost:4318/v1/traces".
func (p *Pipeline) String() string { return p.desc }

// Shutdown exports every span ended so far (ForceFlush), then stops the
// provider and its exporter (closing the file), within ctx. Spans it cannot deliver are
// counted in Dropped, not reported as an error: a collector that is down
// never fails a run. It returns an error only when ctx ends first or the
// file cannot be closed. Calls after the first return the first's result.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() {
		if p.sdk == nil {
			return
		}
		err := p.sdk.ForceFlush(ctx)
		err = errors.Join(err, p.sdk.Shutdown(ctx))
		p.counts.shutDown.Store(true)
		if err != nil {
			p.shutdownErr = fmt.Errorf("otelexport: shutdown: %w", err)
		}
	})
	return p.shutdownErr
}

// Dropped returns how many spans will never reach the exporter's
// destination: spans of exports that failed (or were skipped because the
// last one had just failed) and, once Shutdown has returned, spans that
// never left the queue (it was full, or Shutdown ran out of time).
func (p *Pipeline) Dropped() int64 { return p.counts.dropped() }

// ExportErr returns the first export failure, or nil: why Dropped is not 0.
func (p *Pipeline) ExportErr() error {
	p.counts.mu.Lock()
	defer p.counts.mu.Unlock()
	return p.counts.firstErr
}

// deliveryCounts follows every span from its end to its export. It is a
// SpanProcessor registered before the batch processor, so it sees every
// sampled span the batch processor is offered, including those it drops.
type deliveryCounts struct {
	ended    atomic.Int64 // sampled spans ended
	handed   atomic.Int64 // spans handed to the exporter
	failed   atomic.Int64 // spans of exports that failed or were skipped
	shutDown atomic.Bool

	cooldown  time.Duration
	mu        sync.Mutex
	firstErr  error
	downUntil time.Time
}

func (c *deliveryCounts) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *deliveryCounts) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanContext().IsSampled() {
		c.ended.Add(1)
	}
}

func (c *deliveryCounts) Shutdown(context.Context) error   { return nil }
func (c *deliveryCounts) ForceFlush(context.Context) error { return nil }

func (c *deliveryCounts) dropped() int64 {
	n := c.failed.Load()
	if c.shutDown.Load() {
		n += c.ended.Load() - c.handed.Load()
	}
	return n
}

// countingExporter counts what it is handed and what fails. After a failed
// export it skips exports for a cooldown (one export timeout), so a
// collector that hangs costs one timeout per cooldown rather than one per
// batch: Shutdown stays short when nothing answers. It swallows export
// errors after counting them; the batch processor would otherwise report
// each failed batch to the global error handler, a line per batch.
type countingExporter struct {
	next   sdktrace.SpanExporter
	counts *deliveryCounts
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c := e.counts
	n := int64(len(spans))
	c.handed.Add(n)
	c.mu.Lock()
	skip := time.Now().Before(c.downUntil)
	c.mu.Unlock()
	if skip {
		c.failed.Add(n)
		return nil
	}
	if err := e.next.ExportSpans(ctx, spans); err != nil {
		c.failed.Add(n)
		c.mu.Lock()
		if c.firstErr == nil {
			c.firstErr = err
		}
		c.downUntil = time.Now().Add(c.cooldown)
		c.mu.Unlock()
	}
	return nil
}

func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }
