package scenario_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

func TestParseBuiltinOverrides(t *testing.T) {
	sc, err := scenario.Parse("crowd.yaml", []byte(`
builtin: crowd
duration: 30s
seed: 7
network:
  drop_replies: 0.1
agent:
  stall: "5ms-50ms,5%:1.5s-4s"
clocks:
  drift_ppm: "-5000:5000"
  offset: -50ms:50ms
partitions:
  - {agent: agent-1, from: 5s, to: 15s}
`))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := spec.Builtin("crowd")
	want.Duration = 30 * time.Second
	want.Seed = 7
	want.Network.DropReplies = 0.1
	want.Agent.Stall = spec.Dist{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond, TailP: 0.05,
		TailMin: 1500 * time.Millisecond, TailMax: 4 * time.Second}
	want.Clocks.DriftPPM = spec.Range{Min: -5000, Max: 5000}
	want.Clocks.Offset = spec.DurationRange{Min: -50 * time.Millisecond, Max: 50 * time.Millisecond}
	want.Partitions = []spec.Partition{{Agent: "agent-1", From: 5 * time.Second, To: 15 * time.Second}}
	// No longer the built-in: its description says so.
	want.Description += " (the built-in crowd with duration, network, agent, clocks, partitions changed)"
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("got  %+v\nwant %+v", sc, want)
	}
}

func TestParseNamesAfterFile(t *testing.T) {
	sc, err := scenario.Parse("dir/mine.yaml", []byte(`
duration: 2s
agents: 1
resources: 1
ttl: 1s
agent: {writes_per_lease: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "mine" {
		t.Errorf("name = %q, want the file's base name", sc.Name)
	}
}

// TestParseErrors checks that each problem names the file, the line and
// the field, in the words a user can act on.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // each a whole line of the error
	}{
		{"out of range", "builtin: gap\nnetwork:\n  drop_replies: 1.5\n",
			[]string{"f.yaml:3: network.drop_replies: must be a probability in [0, 1], got 1.5"}},
		{"unknown key", "builtin: gap\nnetwork:\n  drop_reply: 0.5\n",
			[]string{"f.yaml:3: network.drop_reply: unknown key (the keys here are: drop_replies, drop_requests, duplicate, max_retries, reply_delay, request_delay, retry_after, write_delay)"}},
		{"wrong type", "builtin: gap\nagents: many\n",
			[]string{`f.yaml:2: agents: must be an integer, got the string "many"`}},
		{"duration without unit", "builtin: gap\nttl: 1000\n",
			[]string{`f.yaml:2: ttl: must be a duration such as "950ms" or "1.5s" (with its unit), got the integer 1000`}},
		{"bad dist", "builtin: gap\nagent:\n  stall: 10ms-fast\n",
			[]string{`f.yaml:3: agent.stall: "fast" is not a duration (write e.g. 950ms or 1.5s)`}},
		{"unknown builtin", "builtin: nope\n",
			[]string{`f.yaml:1: builtin: no built-in scenario is called "nope" (they are: ` + strings.Join(spec.BuiltinNames(), ", ") + ")"}},
		{"every problem at once", "builtin: gap\nagents: 0\nttl: -1s\nbogus: 1\n",
			[]string{"f.yaml:2: agents: must be in [1, 100000], got 0", "f.yaml:3: ttl: must be in (0, 24h0m0s], got -1s",
				"f.yaml:4: bogus: unknown key"}},
		{"list entry", "builtin: gap\npartitions:\n  - {agent: agent-1, from: 1s, to: 2s}\n  - {agent: agent-9, from: 1s, to: 2s}\n",
			[]string{`f.yaml:4: partitions[1].agent: names no agent: "agent-9"`}},
		{"member faults", "builtin: overlap\netcd:\n  members: 3\nfaults:\n  - {at: 1s, do: pause_leader, duration: 1s}\n  - {at: 2s, do: partition_member, member: 4, duration: 1s}\n  - {at: 3s, do: crash, duration: 1s}\n",
			[]string{"f.yaml:6: faults[1].member: must name a member, from 1 to etcd.members (at most 7), got 4",
				`f.yaml:7: faults[2].do: must be partition_member, pause_member, pause_leader, pause_primary, kill_primary, partition_primary or kill_connections, got "crash"`}},
		{"faults in their old place", "builtin: overlap\netcd:\n  members: 3\n  faults:\n    - {at: 1s, do: pause_leader, duration: 1s}\n",
			[]string{"f.yaml:4: etcd.faults: moved: a scenario's faults of its backend's servers are one list, faults: (the same entries, at the scenario's top level)"}},
		{"range error in what a builtin wrote points at builtin", "builtin: gap\nagents: 1\n",
			[]string{`f.yaml:1: script[3].agent: names no agent: "agent-2"`}},
		{"null", "builtin: gap\nnetwork:\n", []string{"f.yaml:2: network: has no value"}},
		{"alias", "builtin: gap\nttl: &t 1s\nduration: *t\n", []string{"anchors and aliases are not supported"}},
		{"twice, and the rest still reported", "builtin: gap\nttl: 1s\nttl: 2s\nagents: x\n",
			[]string{"f.yaml:3: ttl: is given twice (first on line 2)", `f.yaml:4: agents: must be an integer, got the string "x"`}},
		{"null builtin", "builtin:\nttl: 1s\n", []string{"f.yaml:1: builtin: has no value"}},
		{"null string", "builtin: gap\nname:\n", []string{"f.yaml:2: name: has no value"}},
		{"not a mapping", "- 1\n- 2\n", []string{"f.yaml:1: must be a mapping of keys (name: ..., agents: ...), got a list"}},
		{"empty", "# nothing\n", []string{"f.yaml: the file is empty"}},
		{"syntax", "builtin: gap\nttl: [1s\n", []string{"f.yaml:2: not valid YAML"}},
		{"two documents", "builtin: gap\n---\nbuiltin: gap\n", []string{"holds 2 YAML documents"}},
		{"tag", "builtin: gap\nttl: !!str 1s\n", []string{"f.yaml:2: ttl: YAML tags (!!str) are not supported"}},
		{"not finite", "builtin: gap\nclocks: {drift_ppm: .inf}\n", []string{"f.yaml:2: clocks.drift_ppm: must be a finite number"}},
		{"negative seed", "builtin: gap\nseed: -1\n", []string{"f.yaml:2: seed: must be an integer >= 0, got -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenario.Parse("f.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, scenario.ErrInvalidFile) {
				t.Errorf("errors.Is(err, ErrInvalidFile) = false for %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestRangeErrorsUnwrapToFieldErrors(t *testing.T) {
	_, err := scenario.Parse("f.yaml", []byte("builtin: gap\nnetwork: {duplicate: 2}\n"))
	var fe *spec.FieldError
	if !errors.As(err, &fe) || fe.Field != "network.duplicate" {
		t.Fatalf("want a *spec.FieldError for network.duplicate, got %v", err)
	}
	var fileErr *scenario.FileError
	if !errors.As(err, &fileErr) || fileErr.Line != 2 || fileErr.File != "f.yaml" {
		t.Fatalf("want a *FileError at f.yaml:2, got %#v", fileErr)
	}
}

// TestFormatRoundTripsBuiltins writes every built-in and reads it back.
func TestFormatRoundTripsBuiltins(t *testing.T) {
	for _, name := range spec.BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			want, _ := spec.Builtin(name)
			want.Clocks.Agent = map[string]spec.AgentClock{"agent-1": {}, "agent-2": {DriftPPM: -3, Offset: time.Millisecond}}
			want.Interventions = []history.Intervention{{At: time.Second, Kind: history.SetDropRate, Value: 0.25}}
			text := scenario.Format(want)
			got, err := scenario.Parse(name+".yaml", text)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip changed the scenario:\n%s\ngot  %+v\nwant %+v", text, got, want)
			}
		})
	}
}

func TestShorthands(t *testing.T) {
	dists := []struct {
		in   string
		want spec.Dist
	}{
		{"50ms", spec.Const(50 * time.Millisecond)},
		{"0", spec.Dist{}},
		{"10ms-50ms", spec.Uniform(10*time.Millisecond, 50*time.Millisecond)},
		{"10ms-50ms,5%:1.5s-4s", spec.Dist{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond, TailP: 0.05,
			TailMin: 1500 * time.Millisecond, TailMax: 4 * time.Second}},
		{" 1s , 0.25 : 2s ", spec.Dist{Min: time.Second, Max: time.Second, TailP: 0.25, TailMin: 2 * time.Second, TailMax: 2 * time.Second}},
	}
	for _, tt := range dists {
		got, err := scenario.ParseDist(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDist(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		s, ok := scenario.FormatDist(got)
		back, err := scenario.ParseDist(s)
		if !ok || err != nil || back != got {
			t.Errorf("FormatDist(%+v) = %q, %v: reads back as %+v, %v", got, s, ok, back, err)
		}
	}
	for _, bad := range []string{"", "fast", "10ms-", "1s,5%", "1s,x:2s", "1s,5%:"} {
		if d, err := scenario.ParseDist(bad); err == nil {
			t.Errorf("ParseDist(%q) = %+v, want an error", bad, d)
		}
	}
	if r, err := scenario.ParseRange("-5000:5000"); err != nil || r != (spec.Range{Min: -5000, Max: 5000}) {
		t.Errorf("ParseRange = %+v, %v", r, err)
	}
	if r, err := scenario.ParseRange("-20000"); err != nil || r != (spec.Range{Min: -20000, Max: -20000}) {
		t.Errorf("ParseRange one value = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "a:b", "NaN", "1:Inf"} {
		if r, err := scenario.ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q) = %+v, want an error", bad, r)
		}
	}
	if r, err := scenario.ParseDurationRange("-50ms:50ms"); err != nil || r != (spec.DurationRange{Min: -50 * time.Millisecond, Max: 50 * time.Millisecond}) {
		t.Errorf("ParseDurationRange = %+v, %v", r, err)
	}
}

func ExampleParse() {
	sc, err := scenario.Parse("gap-lossy.yaml", []byte(`
builtin: gap
network:
  drop_replies: 0.5
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(sc.Name, sc.Agents, sc.Network.DropReplies)

	_, err = scenario.Parse("gap-lossy.yaml", []byte(`
builtin: gap
network:
  drop_replies: 1.5
`))
	fmt.Println(err)
	// Output:
	// gap-lossy 2 0.5
	// gap-lossy.yaml:4: network.drop_replies: must be a probability in [0, 1], got 1.5
}

// A log-normal stall and a lock-delay read from a file, and write back to
// the same scenario.
func TestParseLogNormalAndLockDelay(t *testing.T) {
	sc, err := scenario.Parse("ld.yaml", []byte(`
builtin: overlap
lock_delay: 2s
agent:
  stall: {lognormal: {median: 300ms, p99: 4s}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := spec.LogNormal{Median: 300 * time.Millisecond, P99: 4 * time.Second}
	if sc.LockDelay != 2*time.Second || sc.Agent.Stall.LogNormal != want {
		t.Fatalf("lock_delay %v, stall %+v", sc.LockDelay, sc.Agent.Stall)
	}
	back, err := scenario.Parse("ld.yaml", scenario.Format(sc))
	if err != nil || !reflect.DeepEqual(back, sc) {
		t.Fatalf("round trip: %v\n%s", err, scenario.Format(sc))
	}
}
