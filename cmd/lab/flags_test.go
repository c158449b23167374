package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasefence/lab/spec"
)

// badFlags gives every flag of every command a bad value and the one line
// that must name it. A command's flags are read from its --help, so a flag
// added without a case here fails TestEveryBadFlag.
var badFlags = map[string]map[string]struct{ value, want string }{
	"run": {
		"seed":                  {"x", `--seed: must be an integer >= 0, got "x"`},
		"max-events":            {"-1", `--max-events: must be 0 (no bound) or more, got -1`},
		"agents":                {"many", `--agents: must be an integer (or in-process|process, as --agents-as takes it), got "many"`},
		"resources":             {"0", `--resources: must be in [1, 100000], got 0`},
		"duration":              {"3", `--duration: must be a duration such as 950ms or 1.5s, got "3"`},
		"pick":                  {"first", `--pick: must be random, fixed or round-robin, got "first"`},
		"ttl":                   {"-1s", `--ttl: must be in (0, 24h0m0s], got -1s`},
		"skew":                  {"soon", `--skew: must be a duration such as 950ms or 1.5s, got "soon"`},
		"think":                 {"10ms-fast", `--think: "fast" is not a duration (write e.g. 950ms or 1.5s)`},
		"stall":                 {"10ms-50ms,5%", `--stall: the tail "5%" needs the form P:MIN-MAX, e.g. 5%:1.5s-4s`},
		"work-gap":              {"x", `--work-gap: "x" is not a duration (write e.g. 950ms or 1.5s)`},
		"writes":                {"1.5", `--writes: must be an integer, got "1.5"`},
		"renew-at":              {"NaN", `--renew-at: must be a finite number, got "NaN"`},
		"release":               {"maybe", `--release: must be true or false, got "maybe"`},
		"request-delay":         {"", `--request-delay: a duration is missing (write e.g. 950ms), got ""`},
		"reply-delay":           {"1m-", `--reply-delay: a duration is missing (write e.g. 950ms), got "1m-"`},
		"drop-requests":         {"2", `--drop-requests: must be a probability in [0, 1], got 2`},
		"drop-replies":          {"1.5", `--drop-replies: must be a probability in [0, 1], got 1.5`},
		"duplicate":             {"often", `--duplicate: must be a finite number, got "often"`},
		"retry-after":           {"-1s", `--retry-after: must be in [0, 24h0m0s], got -1s`},
		"max-retries":           {"-1", `--max-retries: must be >= 0, got -1`},
		"drift-ppm":             {"a:b", `--drift-ppm: "a" is not a finite number`},
		"offset":                {"1s:x", `--offset: "x" is not a duration (write e.g. 950ms or 1.5s)`},
		"coordinator-drift-ppm": {"fast", `--coordinator-drift-ppm: must be a finite number, got "fast"`},
		"partition":             {"agent-1", `--partition: must be AGENT@FROM-TO, e.g. agent-1@5s-15s, got "agent-1"`},
		"restart":               {"10s:maybe", `--restart: "maybe" must be persist or lost`},
		"push":                  {"sometimes", `--push: must be true or false, got "sometimes"`},
		"push-delay":            {"slow", `--push-delay: "slow" is not a duration (write e.g. 950ms or 1.5s)`},
		"push-drop":             {"-0.5", `--push-drop: must be a probability in [0, 1], got -0.5`},
		"mode":                  {"sideways", `--mode: must be fenced, naive or both, got "sideways"`},
		"contenders":            {"chubby", `--contenders: contender chubby: no contender has that name; they are naive, fenced, etcd-mutex, etcd-mutex-fenced, redsync, redislock, redlock, zookeeper, zookeeper-fenced, pg-advisory, k8s-leaderelection, k8s-leaderelection-fenced (lab contenders lists them)`},
		"json":                  {"yes please", `--json: must be true or false, got "yes please"`},
		"trace":                 {"carrier-pigeon", `--trace: otelexport: bad exporter "carrier-pigeon": want otlp, otlp-http, otlp-grpc (each optionally =URL), file=PATH or none`},
		"html":                  {"no-such-dir/out.html", `--html: open no-such-dir/out.html: no such file or directory`},
		"events":                {"no-such-dir/h.jsonl", `--events: open no-such-dir/h.jsonl: no such file or directory`},
		"swarm":                 {"2", `--swarm: must be true or false, got "2"`},
		"backend":               {"zookeeper", `--backend: must be sim, memory, etcd, redis, postgres, got "zookeeper"`},
		"resource":              {"tape", `--resource: must be memory, sqlite, etcd, http, redis, postgres, got "tape"`},
		"etcd-members":          {"9", `--etcd-members: must be in [1, 7], got 9`},
		"etcd-endpoints":        {"localhost:2379", `--etcd-endpoints: "localhost:2379" must be a URL such as http://127.0.0.1:2379`},
		"redis-url":             {"localhost:6379", `--redis-url: "localhost:6379" must be a URL such as redis://127.0.0.1:6379/0`},
		"time-scale":            {"fast", `--time-scale: must be a number, got "fast"`},
		"agents-as":             {"threads", `--agents-as: must be in-process or process, got "threads"`},
		"redis-topology":        {"cluster", `--redis-topology: must be single or sentinel, got "cluster"`},
		"redis-wait-replicas":   {"-1", `--redis-wait-replicas: must be >= 0, got -1`},
		"redis-wait-timeout":    {"slow", `--redis-wait-timeout: must be a duration such as 950ms or 1.5s, got "slow"`},
		"redis-watermark":       {"maybe", `--redis-watermark: must be true or false, got "maybe"`},
		"postgres-gate":         {"fence", `--postgres-gate: must be floor or lease, got "fence"`},
		"lock-delays":           {"0,-1s", `--lock-delays: lock_delay: must be in [0, 24h0m0s], got -1s`},
		"seeds":                 {"0", `--seeds: must be in [1, 1000], got 0`},
		"stop-at-first":         {"maybe", `--stop-at-first: must be true or false, got "maybe"`},
	},
	"watch": {
		"speed": {"fast", `--speed: must be a number, got "fast"`},
		"mode":  {"none", `--mode: must be fenced, naive or both, got "none"`},
		"save":  {"no-such-dir/s.yaml", `--save: no-such-dir is not a directory`},
	},
	"swarm": {
		// A swarm runs on the simulator: --agents is a count, and only that.
		"agents":     {"many", `--agents: must be an integer, got "many"`},
		"seeds":      {"x", `--seeds: must be an integer, got "x"`},
		"first-seed": {"-1", `--first-seed: must be an integer >= 0, got "-1"`},
		"jobs":       {"-2", `--jobs: must be >= 0, got -2`},
		"json":       {"nope", `--json: must be true or false, got "nope"`},
		"shard":      {"4/2", `--shard: the index counts from 0 to N-1 (as JOB_COMPLETION_INDEX does), N from 1, got "4/2"`},
		"merge":      {"x", `--merge: must be true or false, got "x"`},
	},
	"check": {
		"json":  {"nope", `--json: must be true or false, got "nope"`},
		"html":  {"no-such-dir/out.html", `--html: open no-such-dir/out.html: no such file or directory`},
		"trace": {"carrier-pigeon", `--trace: otelexport: bad exporter "carrier-pigeon": want otlp, otlp-http, otlp-grpc (each optionally =URL), file=PATH or none`},
	},
	"fixtures": {
		"backend":             {"zookeeper", `--backend: must be sim, memory, etcd, redis, postgres, got "zookeeper"`},
		"resource":            {"tape", `--resource: must be memory, sqlite, etcd, http, redis, postgres, got "tape"`},
		"etcd-members":        {"-1", `--etcd-members: must be in [1, 7], got -1`},
		"etcd-endpoints":      {"etcd", `--etcd-endpoints: "etcd" must be a URL such as http://127.0.0.1:2379`},
		"redis-url":           {"etcd", `--redis-url: "etcd" must be a URL such as redis://127.0.0.1:6379/0`},
		"time-scale":          {"11", `--time-scale: must be in (0, 10], got 11`},
		"agents-as":           {"threads", `--agents-as: must be in-process or process, got "threads"`},
		"redis-topology":      {"raft", `--redis-topology: must be single or sentinel, got "raft"`},
		"redis-wait-replicas": {"x", `--redis-wait-replicas: must be an integer, got "x"`},
		"redis-wait-timeout":  {"1500us", `--redis-wait-timeout: must be whole milliseconds >= 1ms, got 1.5ms`},
		"redis-watermark":     {"2", `--redis-watermark: must be true or false, got "2"`},
		"postgres-gate":       {"leases", `--postgres-gate: must be floor or lease, got "leases"`},
		"contenders":          {"redsync:fenced", `--contenders: contender redsync:fenced: redsync's leases have no fence, so its holders cannot write through the gate; run it naive (redsync), or choose a contender with a fence: fenced, etcd-mutex-fenced, zookeeper-fenced, k8s-leaderelection-fenced`},
		"junit":               {"/dev/null/x.xml", `--junit: mkdir /dev/null: not a directory`},
		"v":                   {"loud", `--v: must be true or false, got "loud"`},
		"json":                {"maybe", `--json: must be true or false, got "maybe"`},
		"jobs":                {"some", `--jobs: must be an integer, got "some"`},
		"parallel":            {"0", `--parallel: must be >= 1, got 0`},
	},
}

// knobCommands share lab run's knob flags; their cases are run's.
var knobCommands = []string{"watch", "swarm"}

func runLab(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, dashboard: nil}
	code = a.main(context.Background(), args)
	return code, out.String(), errb.String()
}

var helpFlag = regexp.MustCompile(`(?m)^  -([a-z-]+)`)

// TestEveryBadFlag gives each flag of each command a bad value: the
// command must say, in exactly one line, which flag and what is wrong,
// then where the usage is, print nothing on stdout and exit 2.
func TestEveryBadFlag(t *testing.T) {
	for _, cmd := range []string{"run", "watch", "swarm", "check", "fixtures"} {
		_, _, help := runLab(cmd, "--help")
		names := helpFlag.FindAllStringSubmatch(help, -1)
		if len(names) == 0 {
			t.Fatalf("lab %s --help lists no flags:\n%s", cmd, help)
		}
		for _, m := range names {
			name := m[1]
			tc, ok := badFlags[cmd][name]
			if !ok && slices.Contains(knobCommands, cmd) {
				tc, ok = badFlags["run"][name]
			}
			if !ok {
				t.Errorf("lab %s --%s has no bad-value case in badFlags", cmd, name)
				continue
			}
			args := []string{cmd, "--" + name + "=" + tc.value}
			if cmd == "swarm" && name != "seeds" {
				args = append(args, "--seeds", "1")
			}
			if cmd == "fixtures" {
				args = append(args, "../../fixtures")
			}
			if cmd == "check" {
				args = append(args, "../../history/testdata/stale_write.jsonl")
			}
			t.Run(cmd+"/"+name, func(t *testing.T) {
				code, stdout, stderr := runLab(args...)
				want := "lab " + cmd + ": " + tc.want + "\nrun 'lab " + cmd + " --help' for usage\n"
				if code != exitUsage || stdout != "" || stderr != want {
					t.Errorf("lab %q: exit %d, stdout %q, stderr\n%s\nwant exit 2, no stdout, stderr\n%s", args, code, stdout, stderr, want)
				}
			})
		}
	}
}

// TestCommandLineErrors covers what is wrong with a command line other
// than a flag's value: each is one line and the pointer to the usage.
func TestCommandLineErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--bogus"}, "lab run: --bogus: no such flag\nrun 'lab run --help' for usage\n"},
		{[]string{"watch", "-x", "1"}, "lab watch: --x: no such flag\nrun 'lab watch --help' for usage\n"},
		{[]string{"--nope"}, "lab watch: --nope: no such flag\nrun 'lab watch --help' for usage\n"},
		{[]string{"swarm", "--seeds"}, "lab swarm: --seeds: needs a value\nrun 'lab swarm --help' for usage\n"},
		{[]string{"run", "---seed=1"}, "lab run: \"---seed=1\": bad flag syntax (a flag is -name or --name)\nrun 'lab run --help' for usage\n"},
		{[]string{"fixtures", "--verbose"}, "lab fixtures: --verbose: no such flag\nrun 'lab fixtures --help' for usage\n"},
		{[]string{"scenarios", "--all"}, "lab scenarios: --all: no such flag\nrun 'lab scenarios --help' for usage\n"},
		{[]string{"scenarios", "gap"}, "lab scenarios: takes no arguments, got [\"gap\"]\nrun 'lab scenarios --help' for usage\n"},
		{[]string{"run", "gap", "crowd"}, "lab run: takes one scenario or file, got 2: [\"gap\" \"crowd\"]\nrun 'lab run --help' for usage\n"},
		{[]string{"run", "--agents", "0", "--drop-replies", "2"},
			"lab run: --agents: must be in [1, 100000], got 0\nlab run: --drop-replies: must be a probability in [0, 1], got 2\nrun 'lab run --help' for usage\n"},
		// Not the command line: no pointer to the usage.
		{[]string{"run", "nope"}, "lab run: no built-in scenario or file is called \"nope\" (the built-ins are: " + strings.Join(spec.BuiltinNames(), ", ") + "; run lab scenarios)\n"},
	}
	for _, tt := range tests {
		code, stdout, stderr := runLab(tt.args...)
		if code != exitUsage || stdout != "" || stderr != tt.want {
			t.Errorf("lab %q: exit %d, stdout %q, stderr\n%s\nwant exit 2 and\n%s", tt.args, code, stdout, stderr, tt.want)
		}
	}
}
