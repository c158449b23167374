package otelexport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/leaseotel"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tracing"
)

// jaegerQuery is where the end-to-end test looks for Jaeger's query API.
func jaegerQuery() string {
	if q := os.Getenv("LEASEFENCE_JAEGER_QUERY"); q != "" {
		return strings.TrimSuffix(q, "/")
	}
	return "http://127.0.0.1:16686"
}

// jaegerOTLP is where the test sends spans: the OTLP/HTTP receiver of the
// Jaeger that scripts/jaeger.sh starts.
func jaegerOTLP() string {
	if e := os.Getenv("LEASEFENCE_JAEGER_OTLP"); e != "" {
		return e
	}
	return "http://127.0.0.1:4318"
}

// The Jaeger v2 query API's answer (api/v3): OTLP-JSON spans of every
// trace found, in one result.
type jaegerTraces struct {
	Result struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []jaegerKV `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []jaegerSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	} `json:"result"`
}

type jaegerSpan struct {
	TraceID      string     `json:"traceId"`
	SpanID       string     `json:"spanId"`
	ParentSpanID string     `json:"parentSpanId"`
	Name         string     `json:"name"`
	StartTime    string     `json:"startTimeUnixNano"`
	EndTime      string     `json:"endTimeUnixNano"`
	Attributes   []jaegerKV `json:"attributes"`
	Links        []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
	Status struct {
		Code json.RawMessage `json:"code"` // a number, or the enum's name
	} `json:"status"`
}

type jaegerKV struct {
	Key   string `json:"key"`
	Value struct {
		StringValue string `json:"stringValue"`
		IntValue    string `json:"intValue"`
		ArrayValue  struct {
			Values []struct {
				StringValue string `json:"stringValue"`
			} `json:"values"`
		} `json:"arrayValue"`
	} `json:"value"`
}

// jaegerWarnings is the attribute Jaeger's query service puts on a span it
// had to adjust or sanitize, with what it did.
const jaegerWarnings = "@jaeger@warnings"

// warnings lists what Jaeger did to the span; none for a span it took as
// it was sent.
func (s jaegerSpan) warnings() []string {
	var w []string
	for _, kv := range s.Attributes {
		if kv.Key != jaegerWarnings {
			continue
		}
		if kv.Value.StringValue != "" {
			w = append(w, kv.Value.StringValue)
		}
		for _, v := range kv.Value.ArrayValue.Values {
			w = append(w, v.StringValue)
		}
		if len(w) == 0 {
			w = append(w, "(an empty warning)")
		}
	}
	return w
}

func (s jaegerSpan) start() time.Time { return unixNano(s.StartTime) }
func (s jaegerSpan) end() time.Time   { return unixNano(s.EndTime) }

func unixNano(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n)
}

func (s jaegerSpan) attr(k string) string {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value.StringValue + kv.Value.IntValue
		}
	}
	return ""
}

func (s jaegerSpan) isError() bool {
	c := strings.Trim(string(s.Status.Code), `"`)
	return c == "2" || c == "STATUS_CODE_ERROR"
}

// TestJaegerEndToEnd sends simulated runs' traces to a real Jaeger over
// OTLP/HTTP and reads them back from its query API: every span arrives,
// none is one Jaeger had to repair (it marks those with @jaeger@warnings:
// a span of no length, a child outside its parent's time), and the gap
// scenario's refused write links to the newer holder's lease. It needs a
// Jaeger: scripts/jaeger.sh start.
func TestJaegerEndToEnd(t *testing.T) {
	query := jaegerQuery()
	probe := &http.Client{Timeout: 2 * time.Second}
	resp, err := probe.Get(query + "/api/v3/services")
	if err != nil {
		t.Skipf("no Jaeger at %s: start one with scripts/jaeger.sh start (%v)", query, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Skipf("no Jaeger at %s: start one with scripts/jaeger.sh start (GET /api/v3/services: %s)", query, resp.Status)
	}
	clearOTelEnv(t)

	// gap is checked in detail; the others are the scenarios whose spans
	// Jaeger used to repair, cut short: the shape, not the volume.
	for _, name := range []string{"gap", "renewal", "overlap", "restart-lost", "lost-replies"} {
		t.Run(name, func(t *testing.T) {
			sc := builtin(t, name)
			sc.Duration = min(sc.Duration, 12*time.Second)
			t0 := time.Now()
			spans := sendToJaeger(t, probe, query, sc, t0)
			for _, s := range spans {
				if w := s.warnings(); len(w) > 0 {
					t.Errorf("Jaeger repaired %s %s at t0+%v: %q", s.Name, s.SpanID, s.start().Sub(t0), w)
				}
			}
			if name == "gap" {
				checkGapInJaeger(t, spans, t0)
			}
		})
	}
}

// sendToJaeger runs sc, exports its spans to Jaeger under a service of its
// own, and returns them as Jaeger's query API answers them, once all have
// arrived.
func sendToJaeger(t *testing.T, probe *http.Client, query string, sc spec.Scenario, t0 time.Time) []jaegerSpan {
	t.Helper()
	want, _ := recordRun(t, sc, t0) // the same run, ids and spans: what Jaeger must end up with
	service := fmt.Sprintf("leasefence-e2e-%s-%d", sc.Name, t0.UnixNano())
	p, err := Setup(t.Context(), Config{Exporter: ExporterOTLPHTTP, Endpoint: jaegerOTLP(), ServiceName: service,
		Attributes: tracing.RunAttributes(sc.Header(harness.Modes))})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracing.NewRecorder(sc.Header(harness.Modes), t0, tracing.WithTracerProvider(p.TracerProvider()))
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}}); err != nil {
		t.Fatal(err)
	}
	rec.CloseAt(sc.Duration)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Dropped() != 0 {
		t.Fatalf("%d spans dropped on the way to Jaeger: %v", p.Dropped(), p.ExportErr())
	}

	// Jaeger needs a moment to make what it ingested queryable.
	params := url.Values{
		"query.service_name":   {service},
		"query.num_traces":     {"10000"},
		"query.start_time_min": {t0.Add(-time.Minute).Format(time.RFC3339Nano)},
		"query.start_time_max": {t0.Add(sc.Duration + time.Minute).Format(time.RFC3339Nano)},
	}
	tracesURL := query + "/api/v3/traces?" + params.Encode()
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans, err := fetchJaegerSpans(probe, tracesURL)
		if err == nil && len(spans) == len(want) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s Jaeger has %d of %d spans (%v) at %s", len(spans), len(want), err, tracesURL)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// checkGapInJaeger checks the gap scenario's traces as Jaeger shows them:
// two generations in each of two modes, and agent-1's refused write, from
// its check at 950ms to its refusal at 1400ms, linked to agent-2's lease.
func checkGapInJaeger(t *testing.T, spans []jaegerSpan, t0 time.Time) {
	traces := map[string]bool{}
	leases := map[string]jaegerSpan{} // by span id
	for _, s := range spans {
		traces[strings.ToLower(s.TraceID)] = true
		if s.Name == leaseotel.SpanLease {
			leases[strings.ToLower(s.SpanID)] = s
		}
	}
	if len(traces) != 4 {
		t.Errorf("Jaeger has %d traces, want 4", len(traces))
	}
	var refused []jaegerSpan
	for _, s := range spans {
		if s.Name == leaseotel.SpanFenceCommit && s.attr(string(leaseotel.FenceOutcome)) == leaseotel.OutcomeRefused {
			refused = append(refused, s)
		}
	}
	if len(refused) != 1 {
		t.Fatalf("%d refused fence commits in Jaeger, want 1", len(refused))
	}
	r := refused[0]
	if !r.isError() || r.attr(string(leaseotel.ErrorType)) != leaseotel.ErrorStaleFence {
		t.Errorf("refused commit: status %s, error.type %q; want Error and %q", r.Status.Code, r.attr(string(leaseotel.ErrorType)), leaseotel.ErrorStaleFence)
	}
	if len(r.Links) != 1 {
		t.Fatalf("refused commit has %d links, want 1", len(r.Links))
	}
	newer, ok := leases[strings.ToLower(r.Links[0].SpanID)]
	if !ok || !strings.EqualFold(newer.TraceID, r.Links[0].TraceID) {
		t.Fatalf("refused commit links to %s/%s, not to a lease span", r.Links[0].TraceID, r.Links[0].SpanID)
	}
	if newer.attr(string(leaseotel.LeaseHolder)) != "agent-2" || newer.attr(string(leaseotel.LeaseFence)) != "2" || newer.attr(string(tracing.SimMode)) != "fenced" {
		t.Errorf("the link leads to %s's lease with fence %s (%s), want agent-2's fence 2 (fenced)",
			newer.attr(string(leaseotel.LeaseHolder)), newer.attr(string(leaseotel.LeaseFence)), newer.attr(string(tracing.SimMode)))
	}
	if r.StartTime != fmt.Sprint(t0.Add(950*time.Millisecond).UnixNano()) || r.EndTime != fmt.Sprint(t0.Add(1400*time.Millisecond).UnixNano()) {
		t.Errorf("refused commit spans t0+%v..t0+%v, want t0+950ms..t0+1400ms (its check to its refusal)", r.start().Sub(t0), r.end().Sub(t0))
	}
}

// fetchJaegerSpans returns every span of the query's answer; Jaeger answers
// 404 while nothing matches.
func fetchJaegerSpans(c *http.Client, u string) ([]jaegerSpan, error) {
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var out jaegerTraces
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", body, err)
	}
	var spans []jaegerSpan
	for _, rs := range out.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			spans = append(spans, ss.Spans...)
		}
	}
	return spans, nil
}
