package tracing

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
)

// A library contender's leases are traces of their own beside the lab's,
// each root naming the contender, the library and version that ran and
// its discipline; the lab's own roots carry the mode alone, as always.
func TestContenderRoots(t *testing.T) {
	sc := builtin(t, "gap")
	h := sc.Header(harness.Modes)
	var events []history.Event
	if _, err := harness.Run(context.Background(), sc, harness.RunOptions{Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) {
		if e.Mode == history.Naive {
			e.Mode = "redsync" // the naive mode's history, as if redsync had run it
		}
		events = append(events, e)
	})}}); err != nil {
		t.Fatal(err)
	}
	h.Modes = []history.Mode{"redsync", history.Fenced}
	h.Contenders = []history.Contender{{Name: "redsync", Library: "github.com/go-redsync/redsync/v4", Version: "v4.18.1", Discipline: history.DisciplineNaive}}
	sr := tracetest.NewSpanRecorder()
	rec := NewRecorder(h, time.Unix(0, 0), WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))))
	for _, e := range events {
		rec.Event(e)
	}
	rec.CloseAt(sc.Duration)
	roots := map[string]int{}
	for _, s := range sr.Ended() {
		if s.Parent().IsValid() {
			continue
		}
		mode := attr(s, SimMode).AsString()
		roots[mode]++
		lib := attr(s, SimContenderLibrary).AsString()
		switch mode {
		case "redsync":
			if lib != "github.com/go-redsync/redsync/v4" || attr(s, SimContenderVersion).AsString() != "v4.18.1" || attr(s, SimDiscipline).AsString() != "naive" {
				t.Errorf("a redsync root %q says library %q", s.Name(), lib)
			}
		case "fenced":
			if lib != "" {
				t.Errorf("a root of the lab's own fenced mode names a library %q", lib)
			}
		}
	}
	if roots["redsync"] == 0 || roots["fenced"] == 0 {
		t.Errorf("roots by contender %v: want each contender's", roots)
	}
}
