package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/fixtures"
	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

func parseKnobs(t *testing.T, args ...string) (*scenarioFlags, []string, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var sf scenarioFlags
	sf.register(fs)
	pos, err := parseArgs(fs, args)
	return &sf, pos, err
}

// TestKnobs sets every knob by its flag and checks the scenario field it
// lands in.
func TestKnobs(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		args []string
		want func(*spec.Scenario)
	}{
		{[]string{"--seed", "9"}, func(s *spec.Scenario) { s.Seed = 9 }},
		{[]string{"--agents", "3"}, func(s *spec.Scenario) { s.Agents = 3 }},
		{[]string{"--resources", "2"}, func(s *spec.Scenario) { s.Resources = 2 }},
		{[]string{"--duration", "5s"}, func(s *spec.Scenario) { s.Duration = 5 * time.Second }},
		{[]string{"--pick", "fixed"}, func(s *spec.Scenario) { s.Pick = spec.PickFixed }},
		{[]string{"--ttl", "2s"}, func(s *spec.Scenario) { s.TTL = 2 * time.Second }},
		{[]string{"--skew", "20ms"}, func(s *spec.Scenario) { s.ClockSkew = 20 * ms }},
		{[]string{"--think", "50ms-300ms"}, func(s *spec.Scenario) { s.Agent.Think = spec.Uniform(50*ms, 300*ms) }},
		{[]string{"--stall", "10ms-50ms,5%:1.5s-4s"}, func(s *spec.Scenario) {
			s.Agent.Stall = spec.Dist{Min: 10 * ms, Max: 50 * ms, TailP: 0.05, TailMin: 1500 * ms, TailMax: 4 * time.Second}
		}},
		{[]string{"--work-gap", "5ms"}, func(s *spec.Scenario) { s.Agent.WorkGap = spec.Const(5 * ms) }},
		{[]string{"--writes", "4"}, func(s *spec.Scenario) { s.Agent.WritesPerLease = 4 }},
		{[]string{"--renew-at", "0.4"}, func(s *spec.Scenario) { s.Agent.RenewAt = 0.4 }},
		{[]string{"--release"}, func(s *spec.Scenario) { s.Agent.Release = true }},
		{[]string{"--release=false"}, func(s *spec.Scenario) { s.Agent.Release = false }},
		{[]string{"--request-delay", "1ms-2ms"}, func(s *spec.Scenario) { s.Network.RequestDelay = spec.Uniform(ms, 2*ms) }},
		{[]string{"--reply-delay", "3ms"}, func(s *spec.Scenario) { s.Network.ReplyDelay = spec.Const(3 * ms) }},
		{[]string{"--drop-requests", "0.1"}, func(s *spec.Scenario) { s.Network.DropRequests = 0.1 }},
		{[]string{"--drop-replies", "0.2"}, func(s *spec.Scenario) { s.Network.DropReplies = 0.2 }},
		{[]string{"--duplicate", "0.3"}, func(s *spec.Scenario) { s.Network.Duplicate = 0.3 }},
		{[]string{"--retry-after", "50ms"}, func(s *spec.Scenario) { s.Network.RetryAfter = 50 * ms }},
		{[]string{"--max-retries", "5"}, func(s *spec.Scenario) { s.Network.MaxRetries = 5 }},
		{[]string{"--drift-ppm", "-5000:5000"}, func(s *spec.Scenario) { s.Clocks.DriftPPM = spec.Range{Min: -5000, Max: 5000} }},
		{[]string{"--drift-ppm", "-20000"}, func(s *spec.Scenario) { s.Clocks.DriftPPM = spec.Range{Min: -20000, Max: -20000} }},
		{[]string{"--offset", "-5ms:5ms"}, func(s *spec.Scenario) { s.Clocks.Offset = spec.DurationRange{Min: -5 * ms, Max: 5 * ms} }},
		{[]string{"--coordinator-drift-ppm", "100"}, func(s *spec.Scenario) { s.Clocks.CoordinatorDriftPPM = 100 }},
		{[]string{"--partition", "agent-1@5s-15s", "--partition", "agent-2@1s-2s"}, func(s *spec.Scenario) {
			s.Partitions = []spec.Partition{{Agent: "agent-1", From: 5 * time.Second, To: 15 * time.Second},
				{Agent: "agent-2", From: time.Second, To: 2 * time.Second}}
		}},
		{[]string{"--restart", "10s:persist", "--restart", "20s"}, func(s *spec.Scenario) {
			s.Restarts = []spec.Restart{{At: 10 * time.Second, Persist: true}, {At: 20 * time.Second}}
		}},
		{[]string{"--push", "--push-delay", "2ms", "--push-drop", "0.5"}, func(s *spec.Scenario) {
			s.Push = spec.Push{Enabled: true, Delay: spec.Const(2 * ms), Drop: 0.5}
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			sf, _, err := parseKnobs(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := spec.Builtin("crowd")
			want, _ := spec.Builtin("crowd")
			tt.want(&want)
			if err := sf.apply(&got, "crowd"); err != nil {
				t.Fatal(err)
			}
			// The description says the flags changed the built-in.
			if tt.args[0] == "--seed" {
				if got.Description != want.Description {
					t.Errorf("description %q: another seed is the same scenario", got.Description)
				}
			} else if !strings.HasSuffix(got.Description, " (changed by "+strings.Join(sf.args(), " ")+")") {
				t.Errorf("description %q does not name the flags %q", got.Description, sf.args())
			}
			got.Description = want.Description
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestKnobListsReplaceThenAppend(t *testing.T) {
	sf, _, err := parseKnobs(t, "--restart", "3s")
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := spec.Builtin("restart-lost") // restarts at 10s
	if err := sf.apply(&sc, "restart-lost"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sc.Restarts, []spec.Restart{{At: 3 * time.Second}}) {
		t.Errorf("restarts = %+v, want the file's list replaced", sc.Restarts)
	}
	sf, _, _ = parseKnobs(t, "--restart", "none")
	sc, _ = spec.Builtin("restart-lost")
	if err := sf.apply(&sc, "restart-lost"); err != nil || sc.Restarts != nil {
		t.Errorf("--restart none left %+v (%v)", sc.Restarts, err)
	}
}

func TestKnobErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--drop-replies", "1.5"}, "--drop-replies: must be a probability in [0, 1], got 1.5"},
		{[]string{"--drift-ppm", "-200000:0"}, "--drift-ppm: must be within ±100000 ppm, got -200000"},
		{[]string{"--partition", "agent-99@1s-2s"}, `--partition: names no agent: "agent-99"`},
		{[]string{"--skew", "5s"}, "--skew: must be in [0, ttl), got 5s"},
		{[]string{"--agents", "1"}, `crowd: clocks`}, // not a knob's own field: named in the scenario
	}
	for _, tt := range tests {
		sf, _, err := parseKnobs(t, tt.args...)
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := spec.Builtin("crowd")
		sc.Clocks.Agent = map[string]spec.AgentClock{"agent-2": {}}
		err = sf.apply(&sc, "crowd")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
	for _, bad := range [][]string{{"--stall", "fast"}, {"--agents", "x"}, {"--partition", "agent-1"}, {"--restart", "10s:maybe"}, {"--drift-ppm", "a:b"}, {"--renew-at", "NaN"}} {
		if _, _, err := parseKnobs(t, bad...); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
}

func TestParseArgsInterleaves(t *testing.T) {
	for _, args := range [][]string{
		{"gap", "--seed", "3"},
		{"--seed", "3", "gap"},
		{"--seed=3", "--", "gap"},
	} {
		sf, pos, err := parseKnobs(t, args...)
		if err != nil || !slices.Equal(pos, []string{"gap"}) || len(sf.given) != 1 || sf.given[0] != (givenFlag{"seed", "3"}) {
			t.Errorf("%q: pos %q, given %+v, err %v", args, pos, sf.given, err)
		}
	}
	if _, pos, _ := parseKnobs(t, "--", "--seed"); !slices.Equal(pos, []string{"--seed"}) {
		t.Errorf("after --, flags are arguments: %q", pos)
	}
}

// TestSwarmReproduces checks that the command printed for a failing seed
// runs exactly the scenario the swarm ran for that seed.
func TestSwarmReproduces(t *testing.T) {
	flags := []string{"--duration", "5s", "--agents", "3", "--stall", "10ms-50ms,5%:1.5s-4s"}
	sf, _, err := parseKnobs(t, flags...)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := spec.Builtin("overlap")
	if err := sf.apply(&base, "overlap"); err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{1, 17, 12345} {
		want := harness.SwarmScenario(base, sf.swarmRanges(), seed)
		// The printed line: lab run overlap <flags as given> --seed=S --swarm.
		line := append([]string{"overlap"}, sf.args()...)
		line = append(line, "--seed="+strconv.FormatUint(seed, 10), "--swarm")
		var rsf scenarioFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		rsf.register(fs)
		swarm := fs.Bool("swarm", false, "")
		pos, err := parseArgs(fs, line)
		if err != nil || len(pos) != 1 || !*swarm {
			t.Fatalf("%q: %v", line, err)
		}
		cfg, err := prepareRun(pos[0], &rsf, &backendFlags{backend: backendSim}, &modeFlags{mode: "both"}, "none", "", "", *swarm)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cfg.sc, want) {
			t.Errorf("seed %d: lab run %s runs\n%+v\nbut the swarm ran\n%+v", seed, strings.Join(line, " "), cfg.sc, want)
		}
	}
}

// TestJSONSchema pins the JSON report's fields: adding one is fine,
// renaming or removing one breaks the documented schema.
func TestJSONSchema(t *testing.T) {
	sc, _ := spec.Builtin("gap")
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.JSON(&b, res, report.Stop{}, report.Runner{Backend: backendSim}); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "seed", "digest", "virtual_duration_ms", "events", "drift_within_budget", "modes"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no top-level %q", k)
		}
	}
	modes := doc["modes"].(map[string]any)
	for _, m := range []string{"fenced", "naive"} {
		rep := modes[m].(map[string]any)
		for _, k := range []string{"mode", "digest", "events", "acquisitions", "renewals", "denials", "expiries", "releases",
			"fences_minted", "retries", "messages_lost", "checks_failed", "pushes_applied", "commits_admitted",
			"commits_refused", "stale_writes_landed", "overlaps", "silent_overlaps", "refused_overlaps",
			"containment_breaches", "fence_reuses", "unexplained_refusals", "per_resource", "counterexamples"} {
			if _, ok := rep[k]; !ok {
				t.Errorf("%s: no %q", m, k)
			}
		}
		for _, c := range rep["counterexamples"].([]any) {
			for _, k := range []string{"kind", "at_ms", "resource", "holder", "fence", "detail"} {
				if _, ok := c.(map[string]any)[k]; !ok {
					t.Errorf("%s: a counterexample has no %q", m, k)
				}
			}
		}
	}
}

func TestJUnitReport(t *testing.T) {
	pass, err := scenario.ParseFixture("pass.yaml", []byte("scenario: {builtin: gap}\nexpect: {fenced: {commits_refused: 1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fail, err := scenario.ParseFixture("fail.yaml", []byte("scenario: {builtin: gap}\nexpect: {fenced: {commits_refused: 0}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, loadErr := scenario.ParseFixture("broken.yaml", []byte("scenario: {builtin: nope}\nexpect: {fenced: {overlaps: 1}}\n"))
	runs := []*fixtureRun{
		{file: "pass.yaml", fixture: pass, outcome: fixtures.Run(t.Context(), pass, fixtures.RunOptions{})},
		{file: "fail.yaml", fixture: fail, outcome: fixtures.Run(t.Context(), fail, fixtures.RunOptions{})},
		{file: "broken.yaml", loadErr: loadErr},
	}
	var b bytes.Buffer
	if err := writeJUnit(&b, runs, time.Second); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if doc.Tests != 3 || doc.Failures != 1 || doc.Errors != 1 || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 3 {
		t.Fatalf("report = %+v", doc)
	}
	cases := doc.Suites[0].Cases
	if cases[0].Failure != nil || cases[0].Error != nil {
		t.Errorf("pass.yaml = %+v", cases[0])
	}
	if cases[1].Failure == nil || !strings.Contains(cases[1].Failure.Text, "fail.yaml:2: seed 1: expect.fenced.commits_refused: want 0, got 1") {
		t.Errorf("fail.yaml = %+v", cases[1])
	}
	if cases[2].Error == nil || !strings.Contains(cases[2].Error.Text, `no built-in scenario is called "nope"`) {
		t.Errorf("broken.yaml = %+v", cases[2])
	}
}

// lab run FIXTURE runs where lab fixtures would: on the fixture's backend,
// resource and agents, unless the command line chooses otherwise.
func TestRunFixtureRunsWhereItSays(t *testing.T) {
	for _, tc := range []struct {
		file, flags       string
		backend, resource string // "" backend: the simulator
		processes         bool
	}{
		{"gap.yaml", "", "", "", false},
		{"redis-restart-lost.yaml", "", "redis", "sqlite", false},
		{"redis-restart-lost.yaml", "--resource memory", "redis", "memory", false},
		{"redis-restart-lost.yaml", "--backend memory", "memory", "sqlite", false},
		{"redis-restart-lost.yaml", "--backend sim", "", "", false},
		{"etcd-process-pause.yaml", "", "etcd", "", true},
		{"etcd-overlap.yaml", "", "etcd", "", false},
		{"etcd-overlap.yaml", "--agents-as process", "etcd", "", true},
	} {
		t.Run(tc.file+" "+tc.flags, func(t *testing.T) {
			cfg, err := prepared(t, "../../fixtures/"+tc.file+" "+tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			var backend, resource string
			var processes bool
			if cfg.real != nil {
				backend, resource, processes = cfg.real.config.Backend, cfg.real.config.Resource, cfg.real.agents == registry.Process
			}
			if backend != tc.backend || resource != tc.resource || processes != tc.processes {
				t.Errorf("runs on backend %q, resource %q, processes %v; want %q, %q, %v",
					backend, resource, processes, tc.backend, tc.resource, tc.processes)
			}
		})
	}
}

// --agents takes how the agents run as well as how many there are:
// --agents process is --agents-as process, and leaves the count alone.
func TestAgentsFlagTakesHowTheyRun(t *testing.T) {
	for _, tc := range []struct {
		args      string
		agents    int
		processes bool
	}{
		{"overlap --backend etcd --resource sqlite --agents process --duration 15s", 4, true},
		{"overlap --backend etcd --agents=in-process --agents 6", 6, false},
		{"overlap --backend etcd --agents 6", 6, false},
	} {
		cfg, err := prepared(t, tc.args)
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if cfg.sc.Agents != tc.agents || cfg.real == nil || (cfg.real.agents == registry.Process) != tc.processes {
			t.Errorf("%s: %d agents, real %+v; want %d agents, processes %v", tc.args, cfg.sc.Agents, cfg.real, tc.agents, tc.processes)
		}
	}
}

// A scenario that crashes agents runs only with agents as processes, and
// one with etcd member faults only on etcd; the others refuse it, naming
// the flag that would play it.
func TestCrashesNeedProcesses(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"../../fixtures/etcd-process-pause.yaml --agents-as in-process", "--agents-as: agents in-process cannot play crashes of agents (crashes), which only agents run as processes suffer: use --agents-as process"},
		{"../../fixtures/etcd-process-pause.yaml --backend sim", "--backend: backend sim cannot play crashes of agents (crashes), which only agents run as processes suffer: use --agents-as process"},
		{"../../fixtures/etcd-partition.yaml --backend sim", "--backend: backend sim cannot play etcd member partitions (faults, do: partition_member): use --backend etcd"},
	} {
		if _, err := prepared(t, tc.args); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error beginning %q", tc.args, err, tc.want)
		}
	}
}

// prepared is what lab run ARGS would run, or why it refuses: the
// arguments parsed as the command parses them, and prepareRun.
func prepared(t *testing.T, args string) (*runConfig, error) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var sf scenarioFlags
	sf.register(fs)
	var bf backendFlags
	bf.register(fs)
	pos, err := parseArgs(fs, strings.Fields(args))
	if err != nil || len(pos) != 1 {
		t.Fatalf("%s: %v (positional %q)", args, err, pos)
	}
	return prepareRun(pos[0], &sf, &bf, &modeFlags{mode: "both"}, "none", "", "", false)
}
