package otelexport

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"strconv"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// fileExporter writes each batch of spans as one line of OTLP-JSON: an
// ExportTraceServiceRequest in the OTLP specification's JSON encoding
// (lowerCamelCase fields, hex trace and span ids, enums as numbers, 64-bit
// integers as strings), the format the OpenTelemetry Collector's file
// exporter writes and its otlpjsonfile receiver reads.
//
// It encodes spans directly, without the OTLP exporters' protobuf
// structures: a large run ends tens of thousands of spans, and converting
// them twice then marshalling by reflection cost several times the run.
// BenchmarkFileExporter and BenchmarkFileTrace measure it beside the SDK's
// OTLP/HTTP exporter in its JSON encoding writing the same lines to the
// same file: for the 11,434 spans of the crowd run it takes 3-4.5µs a span
// against 14-31µs, allocates 90KB against 45MB (51 allocations against
// 726,000), and the whole traced run takes well under half the time.
// TestFileEncodingMatchesOTLPExporter holds it to the SDK's encoding.
// It streams: a line is written in chunks of about fileChunk bytes as it
// is encoded, so its memory does not grow with the batch.
type fileExporter struct {
	mu  sync.Mutex
	f   *os.File // nil once shut down
	buf []byte   // the chunk being encoded, reused
	err error    // the first write error of the batch being written
}

// fileChunk is how much encoded JSON the file exporter holds before
// writing it: large enough that writes are few, small enough to stay in
// cache.
const fileChunk = 64 << 10

var errFileClosed = errors.New("otelexport: file exporter is shut down")

func newFileExporter(path string) (*fileExporter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &fileExporter{f: f}, nil
}

func (e *fileExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return errFileClosed
	}
	if cap(e.buf) == 0 {
		e.buf = make([]byte, 0, fileChunk+fileChunk/4)
	}
	e.err = nil
	b := append(appendExportRequest(e.buf[:0], spans, e.write), '\n')
	e.buf = e.write(b)
	return e.err
}

// write writes b unless a write of this batch failed, and returns b
// emptied for reuse. The caller holds e.mu.
func (e *fileExporter) write(b []byte) []byte {
	if e.err == nil {
		_, e.err = e.f.Write(b)
	}
	return b[:0]
}

func (e *fileExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return nil
	}
	err := e.f.Close()
	e.f = nil
	return err
}

// appendExportRequest appends spans as one ExportTraceServiceRequest,
// grouped by resource then instrumentation scope in order of first
// appearance. If flush is not nil, it is handed what has been appended so
// far whenever that passes fileChunk bytes, and encoding goes on in the
// slice it returns.
func appendExportRequest(b []byte, spans []sdktrace.ReadOnlySpan, flush func([]byte) []byte) []byte {
	type scopeGroup struct {
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type resourceGroup struct {
		key    attribute.Distinct
		res    *resource.Resource
		scopes []scopeGroup
	}
	var groups []resourceGroup
	if sameOrigin(spans) {
		// The common case, and the one a Recorder makes: one provider,
		// one tracer. The batch is its own group, copied nowhere.
		s0 := spans[0]
		groups = []resourceGroup{{res: s0.Resource(), scopes: []scopeGroup{{scope: s0.InstrumentationScope(), spans: spans}}}}
	} else {
		for _, s := range spans {
			key, scope := s.Resource().Equivalent(), s.InstrumentationScope()
			gi := len(groups) - 1
			for gi >= 0 && groups[gi].key != key {
				gi--
			}
			if gi < 0 {
				groups = append(groups, resourceGroup{key: key, res: s.Resource()})
				gi = len(groups) - 1
			}
			g := &groups[gi]
			si := len(g.scopes) - 1
			for si >= 0 && g.scopes[si].scope != scope {
				si--
			}
			if si < 0 {
				g.scopes = append(g.scopes, scopeGroup{scope: scope})
				si = len(g.scopes) - 1
			}
			g.scopes[si].spans = append(g.scopes[si].spans, s)
		}
	}

	req := open(b)
	req.key("resourceSpans")
	req.b = append(req.b, '[')
	for i, g := range groups {
		if i > 0 {
			req.b = append(req.b, ',')
		}
		rs := open(req.b)
		if g.res != nil {
			rs.key("resource")
			r := open(rs.b)
			r.attrs("attributes", g.res.Attributes())
			rs.b = r.close()
		}
		rs.key("scopeSpans")
		rs.b = append(rs.b, '[')
		for j, sg := range g.scopes {
			if j > 0 {
				rs.b = append(rs.b, ',')
			}
			ss := open(rs.b)
			if sg.scope != (instrumentation.Scope{}) {
				ss.key("scope")
				sc := open(ss.b)
				sc.str("name", sg.scope.Name)
				sc.str("version", sg.scope.Version)
				sc.attrs("attributes", sg.scope.Attributes.ToSlice())
				ss.b = sc.close()
			}
			ss.key("spans")
			ss.b = append(ss.b, '[')
			for k, s := range sg.spans {
				if k > 0 {
					ss.b = append(ss.b, ',')
				}
				ss.b = appendSpan(ss.b, s)
				if flush != nil && len(ss.b) >= fileChunk {
					ss.b = flush(ss.b)
				}
			}
			ss.b = append(ss.b, ']')
			ss.str("schemaUrl", sg.scope.SchemaURL)
			rs.b = ss.close()
		}
		rs.b = append(rs.b, ']')
		if g.res != nil {
			rs.str("schemaUrl", g.res.SchemaURL())
		}
		req.b = rs.close()
	}
	req.b = append(req.b, ']')
	return req.close()
}

// sameOrigin reports whether every span has the first one's resource (the
// same value, as spans of one provider do) and instrumentation scope.
func sameOrigin(spans []sdktrace.ReadOnlySpan) bool {
	if len(spans) == 0 {
		return false
	}
	res, scope := spans[0].Resource(), spans[0].InstrumentationScope()
	for _, s := range spans[1:] {
		if s.Resource() != res || s.InstrumentationScope() != scope {
			return false
		}
	}
	return true
}

// OTLP enum values. The SDK's codes.Code numbers differ from OTLP's.
const (
	otlpStatusOK    = 1
	otlpStatusError = 2
	// Span flags: the low 8 bits are the W3C trace flags; these say whether
	// the parent (or linked) context was remote, as the OTLP exporters set.
	otlpFlagHasIsRemote = 0x100
	otlpFlagIsRemote    = 0x200
)

func otlpFlags(tf trace.TraceFlags, remote bool) uint64 {
	f := uint64(tf) | otlpFlagHasIsRemote
	if remote {
		f |= otlpFlagIsRemote
	}
	return f
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc, parent := s.SpanContext(), s.Parent()
	o := open(b)
	o.id("traceId", sc.TraceID())
	o.spanID("spanId", sc.SpanID())
	o.str("traceState", sc.TraceState().String())
	if parent.SpanID().IsValid() {
		o.spanID("parentSpanId", parent.SpanID())
	}
	o.uint("flags", otlpFlags(sc.TraceFlags(), parent.IsRemote()))
	o.str("name", s.Name())
	if k := s.SpanKind(); k >= trace.SpanKindInternal && k <= trace.SpanKindConsumer {
		o.uint("kind", uint64(k)) // trace.SpanKind numbers internal..consumer as OTLP does
	}
	o.nanos("startTimeUnixNano", s.StartTime().UnixNano())
	o.nanos("endTimeUnixNano", s.EndTime().UnixNano())
	o.attrs("attributes", s.Attributes())
	o.count("droppedAttributesCount", s.DroppedAttributes())
	if evs := s.Events(); len(evs) > 0 {
		o.key("events")
		o.b = append(o.b, '[')
		for i, ev := range evs {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			e := open(o.b)
			e.nanos("timeUnixNano", ev.Time.UnixNano())
			e.str("name", ev.Name)
			e.attrs("attributes", ev.Attributes)
			e.count("droppedAttributesCount", ev.DroppedAttributeCount)
			o.b = e.close()
		}
		o.b = append(o.b, ']')
	}
	o.count("droppedEventsCount", s.DroppedEvents())
	if links := s.Links(); len(links) > 0 {
		o.key("links")
		o.b = append(o.b, '[')
		for i, l := range links {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			lo := open(o.b)
			lo.id("traceId", l.SpanContext.TraceID())
			lo.spanID("spanId", l.SpanContext.SpanID())
			lo.str("traceState", l.SpanContext.TraceState().String())
			lo.attrs("attributes", l.Attributes)
			lo.count("droppedAttributesCount", l.DroppedAttributeCount)
			lo.uint("flags", otlpFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
			o.b = lo.close()
		}
		o.b = append(o.b, ']')
	}
	o.count("droppedLinksCount", s.DroppedLinks())
	o.key("status")
	st := open(o.b)
	st.str("message", s.Status().Description)
	switch s.Status().Code {
	case codes.Ok:
		st.uint("code", otlpStatusOK)
	case codes.Error:
		st.uint("code", otlpStatusError)
	}
	o.b = st.close()
	return o.close()
}

// object appends one JSON object's fields, with the commas between them.
// Like proto3's JSON mapping, it omits empty strings, zero numbers and
// empty lists.
type object struct {
	b     []byte
	empty bool
}

func open(b []byte) object { return object{b: append(b, '{'), empty: true} }

func (o *object) close() []byte { return append(o.b, '}') }

func (o *object) key(name string) {
	if !o.empty {
		o.b = append(o.b, ',')
	}
	o.empty = false
	o.b = append(o.b, '"')
	o.b = append(o.b, name...)
	o.b = append(o.b, '"', ':')
}

func (o *object) str(name, v string) {
	if v != "" {
		o.key(name)
		o.b = appendString(o.b, v)
	}
}

// id appends a trace id in lowercase hex, as the JSON mapping of OTLP
// writes ids (not base64), without the string TraceID.String would make.
func (o *object) id(name string, id trace.TraceID) {
	o.key(name)
	o.b = append(o.b, '"')
	o.b = hex.AppendEncode(o.b, id[:])
	o.b = append(o.b, '"')
}

// spanID appends a span id as id does a trace id.
func (o *object) spanID(name string, id trace.SpanID) {
	o.key(name)
	o.b = append(o.b, '"')
	o.b = hex.AppendEncode(o.b, id[:])
	o.b = append(o.b, '"')
}

func (o *object) uint(name string, v uint64) {
	if v != 0 {
		o.key(name)
		o.b = strconv.AppendUint(o.b, v, 10)
	}
}

func (o *object) count(name string, n int) {
	o.uint(name, uint64(max(0, min(n, math.MaxUint32))))
}

// nanos appends a fixed64 timestamp, which the JSON mapping quotes.
func (o *object) nanos(name string, ns int64) {
	if ns > 0 {
		o.key(name)
		o.b = append(o.b, '"')
		o.b = strconv.AppendInt(o.b, ns, 10)
		o.b = append(o.b, '"')
	}
}

func (o *object) attrs(name string, kvs []attribute.KeyValue) {
	if len(kvs) > 0 {
		o.key(name)
		o.b = appendKeyValues(o.b, kvs)
	}
}

func appendKeyValues(b []byte, kvs []attribute.KeyValue) []byte {
	b = append(b, '[')
	for i, kv := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendString(b, string(kv.Key))
		b = append(b, `,"value":`...)
		b = appendValue(b, kv.Value)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendValue appends an AnyValue.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return append(strconv.AppendBool(append(b, `{"boolValue":`...), v.AsBool()), '}')
	case attribute.INT64:
		return appendInt(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendDouble(b, v.AsFloat64())
	case attribute.STRING:
		return append(appendString(append(b, `{"stringValue":`...), v.AsString()), '}')
	case attribute.BYTESLICE:
		b = append(b, `{"bytesValue":"`...)
		b = base64.StdEncoding.AppendEncode(b, v.AsByteSlice())
		return append(b, `"}`...)
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), func(b []byte, x bool) []byte {
			return strconv.AppendBool(append(b, `{"boolValue":`...), x)
		})
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), appendIntOpen)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), appendDoubleOpen)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), func(b []byte, x string) []byte {
			return appendString(append(b, `{"stringValue":`...), x)
		})
	case attribute.SLICE:
		b = append(b, `{"arrayValue":{"values":[`...)
		for i, x := range v.AsSlice() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, x)
		}
		return append(b, `]}}`...)
	case attribute.MAP:
		b = append(b, `{"kvlistValue":{"values":`...)
		return append(appendKeyValues(b, v.AsMap()), `}}`...)
	}
	return append(b, `{}`...) // an empty value: no field set
}

// appendArray appends an arrayValue of xs; each(b, x) appends one AnyValue
// without its closing brace.
func appendArray[T any](b []byte, xs []T, each func([]byte, T) []byte) []byte {
	b = append(b, `{"arrayValue":{"values":[`...)
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(each(b, x), '}')
	}
	return append(b, `]}}`...)
}

func appendIntOpen(b []byte, x int64) []byte {
	b = append(b, `{"intValue":"`...)
	return append(strconv.AppendInt(b, x, 10), '"')
}

func appendInt(b []byte, x int64) []byte { return append(appendIntOpen(b, x), '}') }

// appendDoubleOpen follows the proto3 JSON mapping: non-finite values are
// the strings "NaN", "Infinity" and "-Infinity".
func appendDoubleOpen(b []byte, x float64) []byte {
	b = append(b, `{"doubleValue":`...)
	switch {
	case math.IsNaN(x):
		return append(b, `"NaN"`...)
	case math.IsInf(x, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(x, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, x, 'g', -1, 64)
}

func appendDouble(b []byte, x float64) []byte { return append(appendDoubleOpen(b, x), '}') }

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
