package report

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
)

// A report keeps the first counterexamples of each kind and counts the
// rest: the text says how many of each it left out, the JSON has the
// counts, and a report that left none out says nothing of it.
func TestReportsSayHowManyCounterexamplesWereLeftOut(t *testing.T) {
	kept := []history.Counterexample{{Kind: history.StaleWrite, Resource: "res-1", Holder: "agent-1", Fence: 1, Detail: "d"}}
	more := map[history.CounterexampleKind]int{history.StaleWrite: 12, history.FenceReuse: 3}
	res := &history.Result{Scenario: "x", Modes: map[history.Mode]*history.Report{
		history.Naive:  {Mode: history.Naive, Counterexamples: kept, MoreCounterexamples: more},
		history.Fenced: {Mode: history.Fenced, Counterexamples: kept},
	}}
	var text bytes.Buffer
	Text(&text, &history.Header{}, res, Stop{}, Runner{})
	want := "  and 3 more fence-reuse, 12 more stale-write (not kept: the report keeps the first 5 of each kind)\n"
	if got := text.String(); !strings.Contains(got, want) || strings.Count(got, "more stale-write") != 1 {
		t.Errorf("the text report does not say, once, %q:\n%s", want, got)
	}
	var js bytes.Buffer
	if err := JSON(&js, res, Stop{}, Runner{}); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Modes map[history.Mode]map[string]json.RawMessage `json:"modes"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	var gotMore map[history.CounterexampleKind]int
	if err := json.Unmarshal(out.Modes[history.Naive]["more_counterexamples"], &gotMore); err != nil || !maps.Equal(gotMore, more) {
		t.Errorf("naive more_counterexamples = %v (%v), want %v", gotMore, err, more)
	}
	if _, ok := out.Modes[history.Fenced]["more_counterexamples"]; ok {
		t.Error("a report that left no counterexample out has more_counterexamples")
	}
}
