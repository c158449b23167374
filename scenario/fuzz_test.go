package scenario_test

import (
	"reflect"
	"testing"

	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// FuzzParse checks that the loader never panics, and that whatever it
// accepts survives Format and Parse again unchanged. Fixture files go
// through the same decoder, so ParseFixture must not panic either.
func FuzzParse(f *testing.F) {
	for _, name := range spec.BuiltinNames() {
		sc, _ := spec.Builtin(name)
		f.Add(scenario.Format(sc))
		f.Add([]byte("builtin: " + name + "\n"))
	}
	f.Add([]byte("builtin: gap\nnetwork: {drop_replies: 0.5}\nagent: {stall: \"10ms-50ms,5%:1.5s-4s\"}\nclocks: {drift_ppm: -5:5, offset: -1ms:1ms}\n"))
	f.Add([]byte("name: x\nscenario: {builtin: gap}\nseeds: {from: 1, count: 3}\nexpect: {fenced: {commits_refused: \">= overlaps\", timeline: [{at: 1.4s, kind: commit_refused}]}}\n"))
	f.Add([]byte("builtin: crowd\nclocks:\n  agent:\n    agent-3: {drift_ppm: -100, offset: 5ms}\ninterventions:\n  - {at: 1s, kind: toggle-push}\n"))
	f.Add([]byte("name:\nscenario:\n  builtin: gap\n  ttl: 1s\n  ttl: ~\nseeds: [1, ~]\nexpect:\n  fenced: {stale_writes_landed: }\n"))
	f.Add([]byte("name: &a x\nscenario:\n  builtin: gap\n    ttl: 2s\nexpect: {drift_within_budget: *a}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := scenario.ParseFixture("fuzz.yaml", data)
		requireLines(t, err)
		sc, err := scenario.Parse("fuzz.yaml", data)
		requireLines(t, err)
		if err != nil {
			return
		}
		text := scenario.Format(sc)
		back, err := scenario.Parse("fuzz.yaml", text)
		if err != nil {
			t.Fatalf("Format wrote a file Parse refuses: %v\n%s", err, text)
		}
		if !reflect.DeepEqual(back, sc) {
			t.Fatalf("round trip changed the scenario:\n%s\nbefore %+v\nafter  %+v", text, sc, back)
		}
	})
}

// requireLines fails unless every problem about a field names its line.
func requireLines(t *testing.T, err error) {
	t.Helper()
	for _, fe := range fileErrors(err) {
		if fe.Field != "" && fe.Line == 0 {
			t.Fatalf("a problem without its line: %v", fe)
		}
	}
}
