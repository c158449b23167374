package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/leasefence/lab/fixtures"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/scenario"
)

// TestFixturesJSONVerdict: a fixture whose run broke the fenced mode is
// "broken", and so is the whole; a fixture that only missed an
// expectation is "held".
func TestFixturesJSONVerdict(t *testing.T) {
	broken := &history.Result{Modes: map[history.Mode]*history.Report{history.Fenced: {Violations: []string{"1 stale write landed through the gate"}}}}
	held := &history.Result{Modes: map[history.Mode]*history.Report{history.Fenced: {}}}
	fx := &scenario.Fixture{Name: "x", Seeds: []uint64{1}, Backend: registry.Sim}
	run := func(res *history.Result) *fixtureRun {
		return &fixtureRun{file: "x.yaml", fixture: fx, outcome: &fixtures.Outcome{Fixture: fx, Seeds: []fixtures.SeedOutcome{{Seed: 1, Result: res}}}}
	}
	for _, tc := range []struct {
		name  string
		runs  []*fixtureRun
		want  string
		first string
	}{
		{"held", []*fixtureRun{run(held)}, "held", "held"},
		{"broken", []*fixtureRun{run(held), run(broken)}, "broken", "held"},
	} {
		var b bytes.Buffer
		if err := writeFixturesJSON(&b, tc.runs); err != nil {
			t.Fatal(err)
		}
		var got fixturesJSON
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Verdict != tc.want || got.Fixtures[0].Verdict != tc.first {
			t.Errorf("%s: verdict %q (first fixture %q), want %q (%q)\n%s", tc.name, got.Verdict, got.Fixtures[0].Verdict, tc.want, tc.first, &b)
		}
	}
}
