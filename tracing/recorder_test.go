package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/leaseotel"
	"github.com/leasefence/lab/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// t0 is a fixed wall time so that ids and timestamps are reproducible.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// recordRun runs sc with a Recorder on an in-memory provider and returns
// the spans, in the order they ended.
func recordRun(t testing.TB, sc spec.Scenario, start time.Time) ([]sdktrace.ReadOnlySpan, *history.Result) {
	t.Helper()
	return recordRunAs(t, sc, start, "")
}

// recordRunAs is recordRun with the header saying backend made the
// history ("" leaves the simulator's).
func recordRunAs(t testing.TB, sc spec.Scenario, start time.Time, backend string) ([]sdktrace.ReadOnlySpan, *history.Result) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithIDGenerator(NewIDGenerator()))
	h := sc.Header(harness.Modes)
	if backend != "" {
		h.Backend = backend
	}
	rec := NewRecorder(h, start, WithTracerProvider(tp))
	res, err := harness.Run(context.Background(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}})
	if err != nil {
		t.Fatal(err)
	}
	rec.CloseAt(sc.Duration)
	if started, ended := len(sr.Started()), len(sr.Ended()); started != ended {
		t.Fatalf("%d spans started, %d ended: Close must end every span", started, ended)
	}
	return sr.Ended(), res
}

func builtin(t testing.TB, name string) spec.Scenario {
	t.Helper()
	sc, ok := spec.Builtin(name)
	if !ok {
		t.Fatalf("no built-in scenario %q", name)
	}
	return sc
}

// header is the history header of a run of the built-in name in both modes.
func header(t testing.TB, name string) history.Header {
	t.Helper()
	sc := builtin(t, name)
	return sc.Header(harness.Modes)
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// normSpan is a span with its ids replaced by labels (T1, S3) and its
// times by milliseconds since t0: what the golden file holds.
type normSpan struct {
	Trace      string         `json:"trace"`
	Span       string         `json:"span"`
	Parent     string         `json:"parent,omitempty"`
	Name       string         `json:"name"`
	Kind       string         `json:"kind"`
	StartMS    float64        `json:"start_ms"`
	EndMS      float64        `json:"end_ms"`
	Attributes map[string]any `json:"attributes"`
	Events     []normEvent    `json:"events,omitempty"`
	Links      []normLink     `json:"links,omitempty"`
	Status     string         `json:"status"`
}

type normEvent struct {
	Name       string         `json:"name"`
	AtMS       float64        `json:"at_ms"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

type normLink struct {
	Trace      string         `json:"trace"`
	Span       string         `json:"span"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

func msSince(start, t time.Time) float64 { return float64(t.Sub(start)) / float64(time.Millisecond) }

func attrMap(kvs []attribute.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func normalize(spans []sdktrace.ReadOnlySpan, start time.Time) []normSpan {
	traces, ids := map[trace.TraceID]string{}, map[trace.SpanID]string{}
	for _, s := range spans {
		sc := s.SpanContext()
		if _, ok := traces[sc.TraceID()]; !ok {
			traces[sc.TraceID()] = fmt.Sprintf("T%d", len(traces)+1)
		}
		ids[sc.SpanID()] = fmt.Sprintf("S%d", len(ids)+1)
	}
	out := make([]normSpan, 0, len(spans))
	for _, s := range spans {
		n := normSpan{
			Trace: traces[s.SpanContext().TraceID()], Span: ids[s.SpanContext().SpanID()],
			Name: s.Name(), Kind: s.SpanKind().String(),
			StartMS: msSince(start, s.StartTime()), EndMS: msSince(start, s.EndTime()),
			Attributes: attrMap(s.Attributes()),
			Status:     s.Status().Code.String(),
		}
		if s.Status().Description != "" {
			n.Status += ": " + s.Status().Description
		}
		if s.Parent().IsValid() {
			n.Parent = ids[s.Parent().SpanID()]
		}
		for _, e := range s.Events() {
			n.Events = append(n.Events, normEvent{Name: e.Name, AtMS: msSince(start, e.Time), Attributes: attrMap(e.Attributes)})
		}
		for _, l := range s.Links() {
			n.Links = append(n.Links, normLink{Trace: traces[l.SpanContext.TraceID()], Span: ids[l.SpanContext.SpanID()],
				Attributes: attrMap(l.Attributes)})
		}
		out = append(out, n)
	}
	return out
}

// gapQueued is the gap scenario with agent-2 asking for the lease twice
// while agent-1 holds it: both refusals are one event on agent-1's lease.
func gapQueued(t testing.TB) spec.Scenario {
	sc := builtin(t, "gap")
	sc.Name = "gap-queued"
	sc.Script = append([]spec.Action{
		{At: 500 * time.Millisecond, Agent: "agent-2", Do: spec.ActAcquire},
		{At: 700 * time.Millisecond, Agent: "agent-2", Do: spec.ActAcquire},
	}, sc.Script...)
	return sc
}

func TestGolden(t *testing.T) {
	for _, sc := range []spec.Scenario{builtin(t, "gap"), gapQueued(t)} {
		t.Run(sc.Name, func(t *testing.T) {
			spans, _ := recordRun(t, sc, t0)
			got, err := json.MarshalIndent(normalize(spans, t0), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", sc.Name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("spans of the %s scenario differ from %s (go test -update rewrites it); got:\n%s", sc.Name, path, got)
			}
		})
	}
}

// agent-2's two refusals while agent-1 holds the lease are one event on
// agent-1's lease, not traces of their own.
func TestRepeatedDenialsAreOneEvent(t *testing.T) {
	spans, _ := recordRun(t, gapQueued(t), t0)
	leases := 0
	for _, s := range spans {
		if s.Name() == leaseotel.SpanLeaseAcquire && attr(s, leaseotel.LeaseOutcome).AsString() != leaseotel.OutcomeGranted {
			t.Errorf("a %s acquire span: refusals belong on the holder's lease", attr(s, leaseotel.LeaseOutcome).AsString())
		}
		if s.Name() != leaseotel.SpanLease || attr(s, leaseotel.LeaseHolder).AsString() != "agent-1" {
			continue
		}
		leases++
		var denied []sdktrace.Event
		for _, e := range s.Events() {
			if e.Name == EventAcquireDenied {
				denied = append(denied, e)
			}
		}
		if len(denied) != 1 {
			t.Fatalf("%s: %d denial events on agent-1's lease, want 1", attr(s, SimMode).AsString(), len(denied))
		}
		e := denied[0]
		if e.Time.Sub(t0) != 500*time.Millisecond || eventAttr(e, leaseotel.LeaseRequester).AsString() != "agent-2" ||
			eventAttr(e, leaseotel.LeaseDenials).AsInt64() != 2 || eventAttr(e, leaseotel.LeaseDeniedFor).AsInt64() != 200 ||
			eventAttr(e, leaseotel.LeaseReason).AsString() != "held" {
			t.Errorf("denial event at %v with %v, want at 500ms: agent-2 refused twice over 200ms, held", e.Time.Sub(t0), e.Attributes)
		}
	}
	if leases != 2 {
		t.Errorf("%d leases of agent-1, want one per mode", leases)
	}
}

// TestGapTraceShape states the golden file's main facts as assertions: the
// gap scenario's timeline, one trace per generation, and the refused write
// linked to the newer holder.
func TestGapTraceShape(t *testing.T) {
	spans, _ := recordRun(t, builtin(t, "gap"), t0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	byMode := map[string]map[int64]sdktrace.ReadOnlySpan{} // mode -> fence -> "lease" root
	traces := map[trace.TraceID]bool{}
	for _, s := range spans {
		traces[s.SpanContext().TraceID()] = true
		if s.Name() == leaseotel.SpanLease {
			mode := attr(s, SimMode).AsString()
			if byMode[mode] == nil {
				byMode[mode] = map[int64]sdktrace.ReadOnlySpan{}
			}
			byMode[mode][attr(s, leaseotel.LeaseFence).AsInt64()] = s
		}
	}
	if len(traces) != 4 {
		t.Fatalf("%d traces, want 4: two generations in each of two modes", len(traces))
	}
	for _, mode := range []history.Mode{history.Naive, history.Fenced} {
		leases := byMode[string(mode)]
		a, b := leases[1], leases[2]
		if a == nil || b == nil {
			t.Fatalf("%s: want lease roots for fences 1 and 2, got %d", mode, len(leases))
		}
		if h := attr(a, leaseotel.LeaseHolder).AsString(); h != "agent-1" {
			t.Errorf("%s: fence 1 held by %q, want agent-1", mode, h)
		}
		if !a.StartTime().Equal(at(0)) || !a.EndTime().Equal(at(1400)) {
			t.Errorf("%s: agent-1's lease spans %v..%v, want 0ms..1400ms (acquire to its last write)", mode,
				a.StartTime().Sub(t0), a.EndTime().Sub(t0))
		}
		if !b.StartTime().Equal(at(1000)) || !b.EndTime().Equal(at(2000)) {
			t.Errorf("%s: agent-2's lease spans %v..%v, want 1000ms..2000ms (acquire to expiry)", mode,
				b.StartTime().Sub(t0), b.EndTime().Sub(t0))
		}
		events := map[string]time.Time{}
		for _, e := range a.Events() {
			events[e.Name] = e.Time
		}
		for name, want := range map[string]time.Time{
			EventCheckPassed: at(950), EventStallBegan: at(950), EventExpired: at(1000), EventStallEnded: at(1400),
		} {
			if got, ok := events[name]; !ok || !got.Equal(want) {
				t.Errorf("%s: agent-1's lease event %q at %v, want %v", mode, name, got.Sub(t0), want.Sub(t0))
			}
		}

		// agent-1's write at 1400ms: refused (fenced) or landed stale (naive),
		// linked to agent-2's lease either way.
		var commit sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == leaseotel.SpanFenceCommit && s.Parent().SpanID() == a.SpanContext().SpanID() {
				commit = s
			}
		}
		if commit == nil {
			t.Fatalf("%s: no fence commit under agent-1's lease", mode)
		}
		// The write began at its check, stalled, and was answered at 1400ms.
		if commit.SpanContext().TraceID() != a.SpanContext().TraceID() || !commit.StartTime().Equal(at(950)) || !commit.EndTime().Equal(at(1400)) {
			t.Errorf("%s: agent-1's commit spans %v..%v in trace %v, want 950ms..1400ms (its check to its answer) in its lease's trace", mode,
				commit.StartTime().Sub(t0), commit.EndTime().Sub(t0), commit.SpanContext().TraceID())
		}
		if len(commit.Links()) != 1 || commit.Links()[0].SpanContext.SpanID() != b.SpanContext().SpanID() ||
			commit.Links()[0].SpanContext.TraceID() != b.SpanContext().TraceID() {
			t.Errorf("%s: agent-1's commit links %v, want one link to agent-2's lease span %v", mode, commit.Links(), b.SpanContext())
		}
		if got := attr(commit, leaseotel.FenceFloor).AsInt64(); got != 2 {
			t.Errorf("%s: fence.floor = %d, want 2", mode, got)
		}
		if got := attr(commit, leaseotel.FenceFloorHolder).AsString(); got != "agent-2" {
			t.Errorf("%s: fence.floor_holder = %q, want agent-2", mode, got)
		}
		switch mode {
		case history.Fenced:
			if commit.Status().Code != codes.Error || attr(commit, leaseotel.ErrorType).AsString() != leaseotel.ErrorStaleFence {
				t.Errorf("fenced: refused commit has status %v and error.type %q, want Error and %q",
					commit.Status(), attr(commit, leaseotel.ErrorType).AsString(), leaseotel.ErrorStaleFence)
			}
			if attr(commit, leaseotel.FenceOutcome).AsString() != leaseotel.OutcomeRefused {
				t.Errorf("fenced: fence.outcome = %q, want %q", attr(commit, leaseotel.FenceOutcome).AsString(), leaseotel.OutcomeRefused)
			}
			if len(commit.Events()) != 1 || commit.Events()[0].Name != "exception" {
				t.Errorf("fenced: refused commit events %v, want the recorded error", commit.Events())
			}
		case history.Naive:
			// The naive write lands silently: that is the point.
			if commit.Status().Code != codes.Unset || attr(commit, leaseotel.FenceOutcome).AsString() != leaseotel.OutcomeStale {
				t.Errorf("naive: stale write has status %v and fence.outcome %q, want Unset and %q",
					commit.Status(), attr(commit, leaseotel.FenceOutcome).AsString(), leaseotel.OutcomeStale)
			}
		}
	}
}

// TestEveryBuiltinTraceIsWellFormed checks every built-in scenario: each
// child's parent is in its trace, each link points at a "lease" span, every
// event lies within its span, and the counts match what the harness
// reports.
func TestEveryBuiltinTraceIsWellFormed(t *testing.T) {
	for _, name := range spec.BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			sc := builtin(t, name)
			if name == "crowd" {
				sc.Duration = 20 * time.Second // the shape, not the volume
			}
			spans, res := recordRun(t, sc, t0)
			byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
			for _, s := range spans {
				if _, dup := byID[s.SpanContext().SpanID()]; dup {
					t.Fatalf("span id %v used twice", s.SpanContext().SpanID())
				}
				byID[s.SpanContext().SpanID()] = s
			}
			type counts struct{ leases, denied, commits, refused int }
			got := map[string]*counts{}
			for _, s := range spans {
				// A span of no length is one a backend has to repair (Jaeger
				// moves its end and warns): an act with no duration is a span
				// event, never a span.
				if !s.EndTime().After(s.StartTime()) {
					t.Errorf("%s %v lasts %v: not a span", s.Name(), s.SpanContext().SpanID(), s.EndTime().Sub(s.StartTime()))
				}
				root := s
				if s.Parent().IsValid() {
					p, ok := byID[s.Parent().SpanID()]
					if !ok || p.SpanContext().TraceID() != s.SpanContext().TraceID() || p.Name() != leaseotel.SpanLease {
						t.Fatalf("%s %v: parent %v is not a lease span of its trace", s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID())
					}
					if s.StartTime().Before(p.StartTime()) || s.EndTime().After(p.EndTime()) {
						t.Errorf("%s [%v, %v] lies outside its lease [%v, %v]", s.Name(), s.StartTime().Sub(t0), s.EndTime().Sub(t0),
							p.StartTime().Sub(t0), p.EndTime().Sub(t0))
					}
					root = p
				}
				for _, l := range s.Links() {
					if target, ok := byID[l.SpanContext.SpanID()]; !ok || target.Name() != leaseotel.SpanLease {
						t.Errorf("%s links to %v, which is not a lease span", s.Name(), l.SpanContext.SpanID())
					}
				}
				mode := attr(root, SimMode).AsString()
				if got[mode] == nil {
					got[mode] = &counts{}
				}
				c := got[mode]
				for _, e := range s.Events() {
					if e.Time.Before(s.StartTime()) || e.Time.After(s.EndTime()) {
						t.Errorf("%s event %q at %v lies outside its span [%v, %v]", s.Name(), e.Name, e.Time.Sub(t0),
							s.StartTime().Sub(t0), s.EndTime().Sub(t0))
					}
					switch e.Name {
					case EventAcquireDenied:
						if s.Name() != leaseotel.SpanLease {
							t.Errorf("%q event on a %s span, want it on a lease", e.Name, s.Name())
						}
						c.denied += int(eventAttr(e, leaseotel.LeaseDenials).AsInt64())
					case EventFenceCommit:
						// A write at the instant of its check.
						if s.Name() != leaseotel.SpanLease {
							t.Errorf("%q event on a %s span, want it on a lease", e.Name, s.Name())
						}
						c.commits++
						if eventAttr(e, leaseotel.FenceOutcome).AsString() == leaseotel.OutcomeRefused {
							c.refused++
						}
					}
				}
				switch {
				case s.Name() == leaseotel.SpanLease:
					c.leases++
				case s.Name() == leaseotel.SpanLeaseAcquire && attr(s, leaseotel.LeaseOutcome).AsString() == leaseotel.OutcomeDenied:
					c.denied++
				case s.Name() == leaseotel.SpanFenceCommit:
					c.commits++
					if attr(s, leaseotel.FenceOutcome).AsString() == leaseotel.OutcomeRefused {
						c.refused++
					}
				}
			}
			for mode, rep := range res.Modes {
				c := got[string(mode)]
				if c == nil {
					t.Fatalf("%s: no spans", mode)
				}
				if c.leases < rep.Acquisitions || c.leases > rep.FencesMinted {
					t.Errorf("%s: %d lease traces, want between %d acquisitions and %d fences minted", mode, c.leases, rep.Acquisitions, rep.FencesMinted)
				}
				if c.denied != rep.Denials {
					t.Errorf("%s: %d denied acquires (events and spans), the report says %d", mode, c.denied, rep.Denials)
				}
				if c.commits != rep.CommitsAdmitted+rep.CommitsRefused || c.refused != rep.CommitsRefused {
					t.Errorf("%s: %d commits (%d refused), the report says %d admitted and %d refused", mode,
						c.commits, c.refused, rep.CommitsAdmitted, rep.CommitsRefused)
				}
			}
		})
	}
}

func eventAttr(e sdktrace.Event, k attribute.Key) attribute.Value {
	for _, kv := range e.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A refused acquire is an event on the lease of the holder the coordinator
// named, so a holder's trace shows who queued behind it; only the rare
// refusal with no such lease in view is a span of its own.
func TestDenialsLandOnTheHoldersLease(t *testing.T) {
	sc := builtin(t, "crowd")
	sc.Duration = 20 * time.Second
	type denial struct {
		mode      string
		requester string
		at        time.Duration
	}
	holderOf := map[denial]string{}
	denials := history.SubscriberFunc(func(e history.Event) {
		if e.Kind == history.Denied && e.Other >= 0 {
			holderOf[denial{string(e.Mode), spec.AgentName(e.Agent), e.At}] = spec.AgentName(e.Other)
		}
	})
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithIDGenerator(NewIDGenerator()))
	rec := NewRecorder(sc.Header(harness.Modes), t0, WithTracerProvider(tp))
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec, denials}})
	if err != nil {
		t.Fatal(err)
	}
	rec.Close()

	events, spans := 0, 0
	for _, s := range sr.Ended() {
		if s.Name() == leaseotel.SpanLeaseAcquire && attr(s, leaseotel.LeaseOutcome).AsString() == leaseotel.OutcomeDenied {
			spans++
		}
		if s.Name() != leaseotel.SpanLease {
			continue
		}
		for _, e := range s.Events() {
			if e.Name != EventAcquireDenied {
				continue
			}
			events++
			d := denial{attr(s, SimMode).AsString(), eventAttr(e, leaseotel.LeaseRequester).AsString(), e.Time.Sub(t0)}
			holder, ok := holderOf[d]
			if !ok {
				t.Errorf("%+v: no such denial in the run", d)
			} else if got := attr(s, leaseotel.LeaseHolder).AsString(); got != holder {
				t.Errorf("%+v: on %s's lease, but the coordinator named %s", d, got, holder)
			}
		}
	}
	denied := res.Modes[history.Fenced].Denials + res.Modes[history.Naive].Denials
	if events == 0 || spans*20 > denied {
		t.Errorf("%d denial events and %d denied acquire spans for %d denials: want nearly all as events", events, spans, denied)
	}
}

// A coordinator restarted without persistence reissues fences: the
// generations are told apart by incarnation, and the new holder's refused
// writes link to the old incarnation's lease.
func TestRestartSeparatesGenerations(t *testing.T) {
	spans, res := recordRun(t, builtin(t, "restart-lost"), t0)
	if res.Modes[history.Fenced].FenceReuses == 0 {
		t.Fatal("restart-lost reused no fence: the scenario no longer shows what this test needs")
	}
	epochOf := map[trace.SpanID]int64{}
	type gen struct {
		mode     string
		epoch    int64
		resource string
		fence    int64
	}
	seen := map[gen]int{}
	for _, s := range spans {
		if s.Name() == leaseotel.SpanLease {
			epochOf[s.SpanContext().SpanID()] = attr(s, SimEpoch).AsInt64()
			seen[gen{attr(s, SimMode).AsString(), attr(s, SimEpoch).AsInt64(), attr(s, leaseotel.LeaseResource).AsString(), attr(s, leaseotel.LeaseFence).AsInt64()}]++
		}
	}
	for g, n := range seen {
		if n > 1 {
			t.Errorf("%+v has %d lease traces, want 1", g, n)
		}
	}
	crossEpoch := 0
	for _, s := range spans {
		if s.Name() == leaseotel.SpanFenceCommit && s.Status().Code == codes.Error && len(s.Links()) == 1 {
			if epochOf[s.Links()[0].SpanContext.SpanID()] < epochOf[s.Parent().SpanID()] {
				crossEpoch++
			}
		}
	}
	if crossEpoch == 0 {
		t.Error("no refused commit links to a lease of an earlier coordinator incarnation")
	}
}

func TestSameSeedSameIDs(t *testing.T) {
	sc := builtin(t, "overlap")
	first, _ := recordRun(t, sc, t0)
	// The same run recorded a minute later: the same ids, only the
	// timestamps move with t0.
	second, _ := recordRun(t, sc, t0.Add(time.Minute))
	if len(first) != len(second) {
		t.Fatalf("%d spans, then %d", len(first), len(second))
	}
	for i := range first {
		a, b := first[i], second[i]
		if a.SpanContext().TraceID() != b.SpanContext().TraceID() || a.SpanContext().SpanID() != b.SpanContext().SpanID() ||
			a.Parent().SpanID() != b.Parent().SpanID() || a.Name() != b.Name() || !a.StartTime().Add(time.Minute).Equal(b.StartTime()) ||
			!a.EndTime().Add(time.Minute).Equal(b.EndTime()) || !slices.Equal(a.Attributes(), b.Attributes()) {
			t.Fatalf("span %d differs between two recordings of the same run:\n%v %v %s\n%v %v %s", i,
				a.SpanContext().TraceID(), a.SpanContext().SpanID(), a.Name(), b.SpanContext().TraceID(), b.SpanContext().SpanID(), b.Name())
		}
	}

	// Another seed is another run, and so is a real-time run started at
	// another t0 (its seed does not fix it): a collector must not merge
	// them with the first.
	ids := map[trace.TraceID]bool{}
	for _, s := range first {
		ids[s.SpanContext().TraceID()] = true
	}
	reseeded := sc
	reseeded.Seed++
	otherSeed, _ := recordRun(t, reseeded, t0)
	realFirst, _ := recordRunAs(t, sc, t0, "memory")
	realLater, _ := recordRunAs(t, sc, t0.Add(time.Minute), "memory")
	for _, s := range realFirst {
		ids[s.SpanContext().TraceID()] = true
	}
	for name, spans := range map[string][]sdktrace.ReadOnlySpan{"another seed": otherSeed, "a real-time run at another t0": realLater} {
		for _, s := range spans {
			if ids[s.SpanContext().TraceID()] {
				t.Fatalf("trace id %v reused by %s", s.SpanContext().TraceID(), name)
			}
		}
	}
}

func TestTracingDoesNotChangeTheRun(t *testing.T) {
	for _, name := range []string{"gap", "overlap", "lost-replies", "restart-lost", "push"} {
		sc := builtin(t, name)
		plain, err := harness.Run(context.Background(), sc, harness.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, traced := recordRun(t, sc, t0)
		if plain.Digest != traced.Digest {
			t.Errorf("%s: digest %s without tracing, %s with", name, plain.Digest, traced.Digest)
		}
	}
}

// Without NewIDGenerator the provider's own ids are used, and the traces
// keep their shape.
func TestForeignIDGenerator(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	sc := builtin(t, "gap")
	rec := NewRecorder(sc.Header(harness.Modes), t0, WithTracerProvider(tp))
	if _, err := harness.Run(context.Background(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}}); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	want, _ := recordRun(t, sc, t0)
	got := sr.Ended()
	if len(got) != len(want) {
		t.Fatalf("%d spans, want %d", len(got), len(want))
	}
	ng, nw := normalize(got, t0), normalize(want, t0)
	a, _ := json.Marshal(ng)
	b, _ := json.Marshal(nw)
	if !bytes.Equal(a, b) {
		t.Errorf("with random ids the spans have another shape:\n%s\nwant\n%s", a, b)
	}
}

func TestCloseIsIdempotentAndLate(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	sc := builtin(t, "gap")
	rec := NewRecorder(sc.Header(harness.Modes), t0, WithTracerProvider(tp))
	rec.Event(history.Event{Seq: 1, Mode: history.Fenced, Kind: history.RequestSent, Agent: 0, Resource: 0, Other: -1,
		Request: "acquire", RequestID: "r1"})
	rec.Close()
	rec.Close()
	rec.Event(history.Event{Seq: 2, Mode: history.Fenced, Kind: history.Acquired, Agent: 0, Resource: 0, Other: -1,
		Fence: 1, RequestID: "r1"})
	ended := sr.Ended()
	if len(ended) != 1 || ended[0].Name() != leaseotel.SpanLeaseAcquire || attr(ended[0], leaseotel.LeaseOutcome).AsString() != leaseotel.OutcomeUnanswered {
		t.Fatalf("after Close: %d spans, want the one unanswered acquire", len(ended))
	}
	if len(sr.Started()) != 1 {
		t.Errorf("an event after Close started a span")
	}
}

// A partition names an agent and no resource: it lands on the lease the
// agent holds.
func TestPartitionLandsOnTheHeldLease(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	rec := NewRecorder(header(t, "partition"), t0, WithTracerProvider(tp))
	for _, e := range []history.Event{
		{Seq: 1, Kind: history.RequestSent, Agent: 0, Resource: 0, Other: -1, Request: "acquire", RequestID: "r1"},
		{Seq: 2, At: 4 * time.Millisecond, Kind: history.Granted, Agent: 0, Resource: 0, Other: -1, Fence: 1},
		{Seq: 3, At: 5 * time.Millisecond, Kind: history.Acquired, Agent: 0, Resource: 0, Other: -1, Fence: 1, RequestID: "r1"},
		{Seq: 4, At: 10 * time.Millisecond, Kind: history.FaultBegan, Agent: 0, Resource: -1, Other: -1, Fault: "partition", Dur: time.Second},
	} {
		e.Mode = history.Fenced
		rec.Event(e)
	}
	rec.Close()
	for _, s := range sr.Ended() {
		if s.Name() != leaseotel.SpanLease {
			continue
		}
		ev := s.Events()
		if len(ev) != 1 || ev[0].Name != EventFaultBegan || ev[0].Time.Sub(t0) != 10*time.Millisecond {
			t.Fatalf("lease events %v, want %q at 10ms", ev, EventFaultBegan)
		}
		if a := attribute.NewSet(ev[0].Attributes...); a.Len() != 2 || !slices.Contains(a.ToSlice(), SimFault.String("partition")) ||
			!slices.Contains(a.ToSlice(), SimFaultTarget.String("agent-1")) {
			t.Errorf("fault attributes %v, want %s partition on agent-1", ev[0].Attributes, SimFault)
		}
		return
	}
	t.Fatal("no lease span")
}

// endSignal is a span processor that reports each span ended.
type endSignal chan sdktrace.ReadOnlySpan

func (c endSignal) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c endSignal) OnEnd(s sdktrace.ReadOnlySpan)                   { c <- s }
func (c endSignal) Shutdown(context.Context) error                  { return nil }
func (c endSignal) ForceFlush(context.Context) error                { return nil }

// A paced run sends a few events at a time: they are recorded while it
// runs, not held until Close.
func TestPacedEventsAreRecordedBeforeClose(t *testing.T) {
	ended := make(endSignal, 8)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ended))
	rec := NewRecorder(header(t, "gap"), t0, WithTracerProvider(tp))
	t.Cleanup(rec.Close)
	rec.Event(history.Event{Seq: 1, Mode: history.Fenced, Kind: history.RequestSent, Agent: 0, Resource: 0, Other: -1,
		Request: "acquire", RequestID: "r1"})
	rec.Event(history.Event{Seq: 2, At: 4 * time.Millisecond, Mode: history.Fenced, Kind: history.Granted, Agent: 0, Resource: 0,
		Other: -1, Fence: 1, Deadline: time.Second})
	rec.Event(history.Event{Seq: 3, At: 5 * time.Millisecond, Mode: history.Fenced, Kind: history.Acquired, Agent: 0, Resource: 0,
		Other: -1, Fence: 1, RequestID: "r1", Deadline: time.Second})
	select {
	case s := <-ended:
		if s.Name() != leaseotel.SpanLeaseAcquire || attr(s, leaseotel.LeaseOutcome).AsString() != leaseotel.OutcomeGranted {
			t.Errorf("first span ended: %s %v, want the granted acquire", s.Name(), s.Attributes())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the acquire was not recorded within 10s of its reply (events are handed over every %v)", flushEvery)
	}
}

// Events and Close may come from different goroutines: whatever the
// interleaving, every span started is ended.
func TestCloseDuringARun(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	sc := builtin(t, "crowd")
	sc.Duration = 5 * time.Second
	rec := NewRecorder(sc.Header(harness.Modes), t0, WithTracerProvider(tp))
	done := make(chan error)
	go func() {
		_, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}})
		done <- err
	}()
	rec.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec.Close()
	if started, ended := len(sr.Started()), len(sr.Ended()); started != ended {
		t.Errorf("%d spans started, %d ended", started, ended)
	}
}

// The renewal scenario's anchoring, as the traces tell it: the renewal
// reply lands at 1000ms; naive agent-1 then believes for another TTL (to
// 2000ms), the client only until 1100ms, before the coordinator's expiry at
// 1140ms.
func TestRenewalBeliefs(t *testing.T) {
	spans, _ := recordRun(t, builtin(t, "renewal"), t0)
	modeOf := map[trace.SpanID]string{}
	for _, s := range spans {
		if s.Name() == leaseotel.SpanLease {
			modeOf[s.SpanContext().SpanID()] = attr(s, SimMode).AsString()
		}
	}
	want := map[string]int64{"naive": 1000, "fenced": 100}
	for _, s := range spans {
		if s.Name() != leaseotel.SpanLeaseRenew {
			continue
		}
		mode := modeOf[s.Parent().SpanID()]
		if got := attr(s, leaseotel.LeaseBelievedFor).AsInt64(); got != want[mode] {
			t.Errorf("%s: after the renewal agent-1 believes for %dms, want %dms", mode, got, want[mode])
		}
		if s.StartTime().Sub(t0) != 100*time.Millisecond || s.EndTime().Sub(t0) != time.Second {
			t.Errorf("%s: renewal spans %v..%v, want 100ms..1s", mode, s.StartTime().Sub(t0), s.EndTime().Sub(t0))
		}
		delete(want, mode)
	}
	if len(want) != 0 {
		t.Errorf("no renewal span in %v", want)
	}
}

// A Recorder reads nothing but the history: the trace of a history file
// read back is the trace of the run that wrote it, span for span and id for
// id.
func TestHistoryFileTracesAsTheRun(t *testing.T) {
	for _, name := range []string{"gap", "restart-lost", "lost-replies", "partition", "push"} {
		t.Run(name, func(t *testing.T) {
			sc := builtin(t, name)
			h := sc.Header(harness.Modes)
			var file bytes.Buffer
			enc, err := history.NewEncoder(&file, h)
			if err != nil {
				t.Fatal(err)
			}
			live := tracetest.NewSpanRecorder()
			rec := NewRecorder(h, t0, WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(live), sdktrace.WithIDGenerator(NewIDGenerator()))))
			if _, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec, enc}}); err != nil {
				t.Fatal(err)
			}
			rec.CloseAt(sc.Duration)
			if err := enc.Flush(); err != nil {
				t.Fatal(err)
			}

			fh, events, err := history.Decode(&file, name+".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			replayed := tracetest.NewSpanRecorder()
			again := NewRecorder(fh, t0, WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(replayed), sdktrace.WithIDGenerator(NewIDGenerator()))))
			for _, e := range events {
				again.Event(e)
			}
			again.CloseAt(fh.Duration)

			a, b := live.Ended(), replayed.Ended()
			if len(a) == 0 || len(a) != len(b) {
				t.Fatalf("the run made %d spans, its history file %d", len(a), len(b))
			}
			for i := range a {
				if a[i].SpanContext().TraceID() != b[i].SpanContext().TraceID() || a[i].SpanContext().SpanID() != b[i].SpanContext().SpanID() {
					t.Fatalf("span %d: ids %v, from the file %v", i, a[i].SpanContext(), b[i].SpanContext())
				}
			}
			x, _ := json.Marshal(normalize(a, t0))
			y, _ := json.Marshal(normalize(b, t0))
			if !bytes.Equal(x, y) {
				t.Errorf("the history file's spans differ from the run's")
			}
		})
	}
}

// Every fault kind lands on the lease: one of its holder's, and one of no
// agent while the coordinator holds the lease, each with its kind and
// target. The recorder knows no kind.
func TestEveryFaultKindOnTheLease(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	rec := NewRecorder(header(t, "partition"), t0, WithTracerProvider(tp))
	events := []history.Event{
		{Seq: 1, Kind: history.RequestSent, Agent: 0, Resource: 0, Other: -1, Request: "acquire", RequestID: "r1"},
		{Seq: 2, At: 4 * time.Millisecond, Kind: history.Granted, Agent: 0, Resource: 0, Other: -1, Fence: 1, Deadline: time.Second},
		{Seq: 3, At: 5 * time.Millisecond, Kind: history.Acquired, Agent: 0, Resource: 0, Other: -1, Fence: 1, RequestID: "r1", Deadline: time.Second},
	}
	for _, k := range spec.Faults {
		for _, e := range []history.Event{k.Began(0, "", time.Millisecond), k.Began(-1, "etcd member 9", time.Millisecond)} {
			events = append(events, e, e.Ended())
		}
	}
	for i, e := range events {
		e.Mode, e.Seq = history.Fenced, uint64(i+1)
		if e.Kind.IsFault() {
			e.At = 10 * time.Millisecond
		}
		rec.Event(e)
	}
	rec.Close()
	want := make(map[string]int)
	for _, k := range spec.Faults {
		for _, target := range []string{"agent-1", "etcd member 9"} {
			want[EventFaultBegan+" "+string(k)+" on "+target]++
			want[EventFaultEnded+" "+string(k)+" on "+target]++
		}
	}
	for _, s := range sr.Ended() {
		if s.Name() != leaseotel.SpanLease {
			continue
		}
		got := make(map[string]int)
		for _, ev := range s.Events() {
			a := attribute.NewSet(ev.Attributes...)
			kind, _ := a.Value(SimFault)
			target, _ := a.Value(SimFaultTarget)
			got[ev.Name+" "+kind.AsString()+" on "+target.AsString()]++
		}
		if !maps.Equal(got, want) {
			t.Errorf("the lease's fault events: %v\nwant %v", got, want)
		}
		return
	}
	t.Fatal("no lease span")
}
