package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

const gapFixture = `name: gap
description: the check-to-write gap
scenario:
  builtin: gap
seeds: [1]
expect:
  naive:
    stale_writes_landed: ">= 1"
    counterexamples:
      - {kind: stale-write, at_ms: 1400, holder: agent-1, fence: 1, other: agent-2, other_fence: 2}
  fenced:
    stale_writes_landed: 0
    commits_refused: "== refused_overlaps"
    timeline:
      - {at: 1400ms, kind: commit_refused, agent: agent-1, fence: 1, other: agent-2, other_fence: 2}
`

func TestFixturePasses(t *testing.T) {
	fx, err := scenario.ParseFixture("gap.yaml", []byte(gapFixture))
	if err != nil {
		t.Fatal(err)
	}
	if fx.Name != "gap" || !slices.Equal(fx.Seeds, []uint64{1}) || len(fx.Modes) != 2 {
		t.Fatalf("fixture = %+v", fx)
	}
	// Five in the file, and the implicit fenced.violations == 0.
	if len(fx.Expect) != 6 || fx.Expect[5].Field != "expect.fenced.violations (implicit)" {
		t.Fatalf("expectations = %+v", fx.Expect)
	}
	out := fx.Run(t.Context(), scenario.RunOptions{})
	if !out.Passed() {
		t.Fatalf("failures: %v (err %v)", out.Failures(), out.Err)
	}
}

// TestFixtureFails checks that each kind of expectation can fail, and says
// what it found instead.
func TestFixtureFails(t *testing.T) {
	tests := []struct {
		name, expect string
		want         string
	}{
		{"counter", "fenced: {commits_refused: 0}", "seed 1: expect.fenced.commits_refused: want 0, got 1"},
		{"comparison", `naive: {stale_writes_landed: "> 1"}`, "seed 1: expect.naive.stale_writes_landed: want > 1, got 1"},
		{"counter against counter", `fenced: {commits_admitted: "> commits_refused"}`,
			"want > commits_refused, got 1 (commits_refused is 1)"},
		{"counterexample", "naive: {counterexamples: [{kind: stale-write, at_ms: 1399}]}",
			"none matches; the report has: stale-write at 1400ms res-1 agent-1@1 vs agent-2@2"},
		{"timeline", "fenced: {timeline: [{at: 1401ms, kind: commit_refused}]}",
			"none matches; the commit_refused events are: {at: 1.4s, kind: commit_refused, agent: agent-1, resource: res-1, fence: 1, other: agent-2, other_fence: 2}"},
		{"drift", "drift_within_budget: false", "expect.drift_within_budget: want false, got true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx, err := scenario.ParseFixture("f.yaml", []byte("scenario: {builtin: gap}\nexpect:\n  "+tt.expect+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			out := fx.Run(t.Context(), scenario.RunOptions{Jobs: 1})
			if out.Passed() {
				t.Fatal("passed")
			}
			var got []string
			for _, f := range out.Failures() {
				got = append(got, f.String())
			}
			if !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Errorf("failures\n%s\ndo not contain\n%s", strings.Join(got, "\n"), tt.want)
			}
		})
	}
}

func TestFixtureSeeds(t *testing.T) {
	for _, tt := range []struct {
		seeds string
		want  []uint64
	}{
		{"7", []uint64{7}},
		{"[3, 1, 2]", []uint64{3, 1, 2}},
		{"{from: 10, count: 3}", []uint64{10, 11, 12}},
	} {
		fx, err := scenario.ParseFixture("f.yaml", []byte("scenario: {builtin: gap}\nseeds: "+tt.seeds+"\nexpect: {fenced: {stale_writes_landed: 0}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fx.Seeds, tt.want) || fx.Scenario.Seed != tt.want[0] {
			t.Errorf("seeds %s = %v (scenario seed %d), want %v", tt.seeds, fx.Seeds, fx.Scenario.Seed, tt.want)
		}
	}
}

func TestFixtureErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown counter", "scenario: {builtin: gap}\nexpect:\n  fenced: {stale_writes: 0}\n",
			"f.yaml:3: expect.fenced.stale_writes: unknown counter (the counters are: acquisitions, renewals,"},
		{"bad comparison", "scenario: {builtin: gap}\nexpect:\n  fenced:\n    overlaps: \"about 3\"\n",
			`f.yaml:4: expect.fenced.overlaps: must be a number or a comparison such as ">= 1" or "<= overlaps", got "about 3"`},
		{"compare with no counter", "scenario: {builtin: gap}\nexpect:\n  fenced: {overlaps: \">= lots\"}\n",
			`f.yaml:3: expect.fenced.overlaps: compares with "lots", which is no counter`},
		{"mode not run", "scenario: {builtin: gap}\nmodes: fenced\nexpect:\n  naive: {overlaps: 1}\n",
			"f.yaml:4: expect.naive: the fixture does not run the naive mode (modes: fenced)"},
		{"scenario out of range", "scenario:\n  builtin: gap\n  network:\n    drop_replies: 1.5\nexpect: {fenced: {overlaps: 1}}\n",
			"f.yaml:4: scenario.network.drop_replies: must be a probability in [0, 1], got 1.5"},
		{"no scenario", "name: x\nexpect: {fenced: {overlaps: 1}}\n", "f.yaml:1: scenario: is required"},
		{"no expect", "scenario: {builtin: gap}\n", "f.yaml:1: expect: is required"},
		{"unknown top key", "scenario: {builtin: gap}\nexpects: {}\n", "f.yaml:2: expects: unknown key"},
		{"unknown agents", "backend: etcd\nagents: threads\nscenario: {builtin: gap}\nexpect: {fenced: {stale_writes_landed: 0}}\n",
			`f.yaml:2: agents: must be in-process or process, got "threads"`},
		{"processes off etcd", "backend: memory\nagents: process\nscenario: {builtin: gap}\nexpect: {fenced: {stale_writes_landed: 0}}\n",
			`f.yaml:2: agents: agents as processes need backend etcd, got "memory"`},
		{"unknown event kind", "scenario: {builtin: gap}\nexpect:\n  fenced:\n    timeline: [{at: 1s, kind: wrote}]\n",
			`f.yaml:4: expect.fenced.timeline[0].kind: no event is of kind "wrote"`},
		{"event without instant", "scenario: {builtin: gap}\nexpect:\n  fenced:\n    timeline:\n      - {kind: acquired}\n",
			"f.yaml:5: expect.fenced.timeline[0]: an expected event needs at least `at` and `kind`"},
		{"unknown counterexample kind", "scenario: {builtin: gap}\nexpect:\n  fenced:\n    counterexamples: [{kind: oops}]\n",
			`f.yaml:4: expect.fenced.counterexamples[0].kind: no counterexample is of kind "oops"`},
		{"seed count", "scenario: {builtin: gap}\nseeds: {from: 1, count: 0}\nexpect: {fenced: {overlaps: 1}}\n",
			"f.yaml:2: seeds.count: must be in [1, 100000], got 0"},
		{"bad modes", "scenario: {builtin: gap}\nmodes: all\nexpect: {fenced: {overlaps: 1}}\n",
			`f.yaml:2: modes: must be fenced, naive or both, got "all"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenario.ParseFixture("f.yaml", []byte(tt.yaml))
			if err == nil || !errors.Is(err, scenario.ErrInvalidFile) {
				t.Fatalf("err = %v, want an ErrInvalidFile", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}

// TestLoadReadsFixtureScenario checks that `lab run fixture.yaml` runs the
// fixture's scenario with its first seed, under the fixture's name.
func TestLoadReadsFixtureScenario(t *testing.T) {
	sc, err := scenario.Parse("f.yaml", []byte("scenario: {builtin: gap}\nseeds: [5, 6]\nexpect: {fenced: {overlaps: 1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := spec.Builtin("gap")
	want.Seed = 5
	if sc.Name != "f" || sc.Description != want.Description || sc.Seed != 5 || len(sc.Script) != len(want.Script) {
		t.Errorf("got %+v", sc)
	}
}

// A fixture run on its own is reported under its own name and
// description, and a built-in it changes is described as changed, never
// with the built-in's words alone.
func TestFixtureScenarioDescribesItself(t *testing.T) {
	overlap, _ := spec.Builtin("overlap")
	for _, tt := range []struct {
		name, yaml         string
		wantName, wantDesc string
	}{
		{"own name and description", "name: mine\ndescription: three agents share two resources\nscenario: {builtin: overlap, agents: 3, resources: 2}\nexpect: {fenced: {overlaps: 1}}\n",
			"mine", "three agents share two resources"},
		{"changed built-in, no description", "name: mine\nscenario: {builtin: overlap, agents: 3, resources: 2}\nexpect: {fenced: {overlaps: 1}}\n",
			"mine", overlap.Description + " (the built-in overlap with agents, resources changed)"},
		{"only another seed", "name: mine\nscenario: {builtin: overlap, seed: 4}\nexpect: {fenced: {overlaps: 1}}\n",
			"mine", overlap.Description},
		{"the scenario names itself", "name: mine\ndescription: d\nscenario: {builtin: overlap, name: inner, description: inner d, agents: 3}\nexpect: {fenced: {overlaps: 1}}\n",
			"inner", "inner d"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := scenario.Parse("f.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if sc.Name != tt.wantName || sc.Description != tt.wantDesc {
				t.Errorf("named %q, described %q; want %q, %q", sc.Name, sc.Description, tt.wantName, tt.wantDesc)
			}
		})
	}
}

func TestFixtureRunStopsWithContext(t *testing.T) {
	fx, err := scenario.ParseFixture("f.yaml", []byte("scenario: {builtin: crowd}\nseeds: {from: 1, count: 50}\nexpect: {fenced: {stale_writes_landed: 0}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithCancel(t)
	cancel()
	out := fx.Run(ctx, scenario.RunOptions{})
	if out.Err == nil || out.Passed() || len(out.Seeds) == len(fx.Seeds) {
		t.Fatalf("a cancelled run should stop early and not pass: err %v, %d seeds", out.Err, len(out.Seeds))
	}
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

func ExampleFixture_Run() {
	fx, err := scenario.ParseFixture("gap.yaml", []byte(`
scenario: {builtin: gap}
expect:
  naive:  {stale_writes_landed: ">= 1"}
  fenced: {stale_writes_landed: 0, commits_refused: 1}
`))
	if err != nil {
		panic(err)
	}
	out := fx.Run(context.Background(), scenario.RunOptions{})
	fmt.Println(fx.Name, out.Passed(), len(fx.Expect), "expectations")
	// Output: gap true 4 expectations
}

// A fixture may name a real-time backend, and then expects only what any
// real run can promise; it runs through RunOptions.Runner.
func TestFixtureBackend(t *testing.T) {
	for _, tt := range []struct {
		name, yaml, wantErr string
	}{
		{"invariants and at-least", "backend: etcd\nscenario: {builtin: gap}\nexpect: {naive: {stale_writes_landed: \">= 1\"}, fenced: {stale_writes_landed: 0, refused_overlaps: \"<= commits_refused\"}}\n", ""},
		{"exact count", "backend: memory\nscenario: {builtin: gap}\nexpect: {fenced: {commits_refused: 1}}\n", "f.yaml:3: expect.fenced.commits_refused: backend memory runs in real time"},
		{"at most", "backend: etcd\nscenario: {builtin: gap}\nexpect: {fenced: {commits_refused: \"<= 3\"}}\n", "not <= 3"},
		{"timeline", "backend: etcd\nscenario: {builtin: gap}\nexpect: {fenced: {timeline: [{at: 1s, kind: acquired, agent: agent-1}]}}\n", "real time"},
		{"unknown backend", "backend: zookeeper\nscenario: {builtin: gap}\nexpect: {fenced: {stale_writes_landed: 0}}\n", "backend: must be sim, memory, etcd"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx, err := scenario.ParseFixture("f.yaml", []byte(tt.yaml))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fx.Backend != "etcd" {
					t.Errorf("backend %q", fx.Backend)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}

	fx, err := scenario.ParseFixture("f.yaml", []byte("backend: memory\nscenario: {builtin: gap}\nexpect: {fenced: {stale_writes_landed: 0}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if out := fx.Run(t.Context(), scenario.RunOptions{}); !errors.Is(out.Err, scenario.ErrNoRunner) {
		t.Errorf("without a runner: %v, want ErrNoRunner", out.Err)
	}
	var ran []string
	out := fx.Run(t.Context(), scenario.RunOptions{Runner: func(ctx context.Context, fx *scenario.Fixture, sc spec.Scenario, opts harness.RunOptions) (*harness.Result, error) {
		ran = append(ran, fx.Backend)
		return harness.Run(ctx, sc, opts)
	}})
	if !out.Passed() || len(ran) != 1 || ran[0] != "memory" {
		t.Errorf("with a runner: passed %v, ran %v", out.Passed(), ran)
	}

	sim, _ := scenario.ParseFixture("g.yaml", []byte(gapFixture))
	if err := sim.SetBackend("etcd"); !errors.Is(err, scenario.ErrNotRealSafe) || sim.Backend != scenario.BackendSim {
		t.Errorf("SetBackend(etcd) on an exact fixture: %v, backend %q", err, sim.Backend)
	}
	if err := sim.SetBackend("sim"); err != nil {
		t.Error(err)
	}
}

// A fixture that names resource http and no backend runs on memory, over
// the wire; its forgers count is taken as the forgeries in turn; the
// simulator refuses it.
func TestFixtureResource(t *testing.T) {
	fx, err := scenario.ParseFixture("f.yaml", []byte("resource: http\nscenario:\n  builtin: overlap\n  resources: 2\n  forgers: 5\nexpect:\n  fenced: {forgeries_landed: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if fx.Backend != "memory" || fx.Resource != "http" {
		t.Errorf("backend %q, resource %q: want memory, http", fx.Backend, fx.Resource)
	}
	want := []spec.Forgery{spec.ForgeOwnKey, spec.ForgeTampered, spec.ForgeAlgNone, spec.ForgeReplayed, spec.ForgeOwnKey}
	if !slices.Equal(fx.Scenario.Forgers, want) {
		t.Errorf("forgers %v, want %v", fx.Scenario.Forgers, want)
	}
	if err := fx.SetBackend(scenario.BackendSim); err == nil || !strings.Contains(err.Error(), "f.yaml:1") {
		t.Errorf("SetBackend(sim) = %v, want a refusal naming f.yaml:1", err)
	}
}
