package scenario_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

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
			`f.yaml:2: agents: agents process needs backend etcd, redis or postgres, got "memory"`},
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
		{"contenders and modes", "scenario: {builtin: gap}\nmodes: fenced\ncontenders: [fenced]\nexpect: {fenced: {overlaps: 1}}\n",
			"f.yaml:3: contenders: and modes both choose what runs: give one (modes: fenced is contenders: [fenced])"},
		{"contenders not a list", "scenario: {builtin: gap}\ncontenders: redsync\nexpect: {fenced: {overlaps: 1}}\n",
			"f.yaml:2: contenders: must be a list of contenders' names, e.g. [redsync, fenced]"},
		{"unknown contender", "backend: memory\nscenario: {builtin: gap}\ncontenders: [fenced, chubby]\nexpect: {fenced: {overlaps: \">= 1\"}}\n",
			"f.yaml:3: contenders: contender chubby: no contender has that name"},
		{"library contender on the simulator", "scenario: {builtin: gap}\ncontenders: [redsync]\nexpect: {redsync: {overlaps: 1}}\n",
			"f.yaml:2: contenders: contender redsync: a library's lock runs in real time, not on the simulator: it runs on --backend memory, etcd or redis"},
		{"fenced lock without a fence", "backend: memory\nscenario: {builtin: gap}\ncontenders: [redislock:fenced]\nexpect: {redislock: {overlaps: \">= 1\"}}\n",
			"f.yaml:3: contenders: contender redislock:fenced: redislock's leases have no fence"},
		{"expectation of a contender not run", "backend: memory\nscenario: {builtin: gap}\ncontenders: [redsync]\nexpect: {redislock: {overlaps: \">= 1\"}}\n",
			"f.yaml:4: expect.redislock: the fixture does not run the redislock mode (modes: redsync)"},
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

// A fixture's contenders run in the order given, each held to its
// expectations by name, and a fenced one to its invariants implicitly.
func TestFixtureContenders(t *testing.T) {
	fx, err := scenario.ParseFixture("f.yaml", []byte("backend: memory\nscenario: {builtin: gap}\ncontenders: [redsync, etcd-mutex-fenced]\n"+
		"expect:\n  redsync: {stale_writes_landed: \">= 1\", mutual_exclusion_violations: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fx.Modes, []history.Mode{"redsync", "etcd-mutex-fenced"}) {
		t.Errorf("modes %v", fx.Modes)
	}
	var fields []string
	for _, x := range fx.Expect {
		fields = append(fields, x.Field)
	}
	want := []string{"expect.redsync.stale_writes_landed", "expect.redsync.mutual_exclusion_violations",
		"expect.etcd-mutex-fenced.violations (implicit)", "expect.etcd-mutex-fenced.vacuous (implicit)"}
	if !slices.Equal(fields, want) {
		t.Errorf("expectations %q, want %q", fields, want)
	}
}

// A fixture of library contenders cannot be moved to the simulator.
func TestFixtureContendersStayReal(t *testing.T) {
	fx, err := scenario.ParseFixture("f.yaml", []byte("backend: memory\nscenario: {builtin: gap}\ncontenders: [etcd-mutex]\n"+
		"expect: {etcd-mutex: {stale_writes_landed: \">= 1\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.SetBackend(registry.Sim); err == nil || !strings.Contains(err.Error(), "contender etcd-mutex: a library's lock runs in real time") {
		t.Errorf("SetBackend(sim) = %v", err)
	}
	if err := fx.SetBackend(registry.Redis); err != nil {
		t.Errorf("SetBackend(redis) = %v", err)
	}
}

// lab fixtures --contenders keeps a fixture's contenders among those
// asked for, with their expectations and the run's own, and refuses a
// fixture that runs none of them.
func TestFixtureOnly(t *testing.T) {
	fx, err := scenario.ParseFixture("f.yaml", []byte("backend: memory\nscenario: {builtin: gap}\ncontenders: [redsync, redislock, fenced]\n"+
		"expect:\n  drift_within_budget: true\n  redsync: {stale_writes_landed: \">= 1\"}\n  redislock: {stale_writes_landed: \">= 1\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.Only([]history.Mode{"redislock", "naive"}); err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, x := range fx.Expect {
		fields = append(fields, x.Field)
	}
	if !slices.Equal(fx.Modes, []history.Mode{"redislock"}) || !slices.Equal(fields, []string{"expect.drift_within_budget", "expect.redislock.stale_writes_landed"}) {
		t.Errorf("modes %v, expectations %q", fx.Modes, fields)
	}
	if err := fx.Only([]history.Mode{"fenced"}); !errors.Is(err, scenario.ErrNoContender) {
		t.Errorf("Only(fenced) of a fixture left with redislock: %v", err)
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

	sim, err := scenario.ParseFixture("g.yaml", []byte("scenario: {builtin: gap}\nexpect: {fenced: {commits_refused: 1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetBackend("etcd"); !errors.Is(err, scenario.ErrNotRealSafe) || sim.Backend != registry.Sim {
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
	if err := fx.SetBackend(registry.Sim); err == nil || !strings.Contains(err.Error(), "f.yaml:1") {
		t.Errorf("SetBackend(sim) = %v, want a refusal naming f.yaml:1", err)
	}
}
