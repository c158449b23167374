package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// lab run battery on the simulator runs every scenario of the battery,
// a line of progress each on stderr; its JSON keeps each scenario's
// report, modes and all, and adds each contender's findings summed over
// the battery. The lab's own fenced lock holds; its naive discipline's
// stale writes are the expected finding, not a failure: exit 0.
func TestBatteryJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runLab("run", "battery", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var doc struct {
		Battery []struct {
			Scenario string                     `json:"scenario"`
			Modes    map[string]json.RawMessage `json:"modes"`
		} `json:"battery"`
		Contenders map[history.Mode]struct {
			Findings history.Findings `json:"findings"`
			Verdict  string           `json:"verdict"`
		} `json:"contenders"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	battery := spec.Battery()
	if len(doc.Battery) != len(battery) {
		t.Fatalf("%d scenarios in the JSON, the battery has %d", len(doc.Battery), len(battery))
	}
	for i, b := range battery {
		if doc.Battery[i].Scenario != b.Name || doc.Battery[i].Modes["naive"] == nil || doc.Battery[i].Modes["fenced"] == nil {
			t.Errorf("scenario %d: %s with modes %v, want %s with naive and fenced", i, doc.Battery[i].Scenario, doc.Battery[i].Modes, b.Name)
		}
		if !strings.Contains(stderr, "lab run battery "+itoa(i+1)+"/"+itoa(len(battery))+" "+b.Name+": naive: lock ") {
			t.Errorf("no line of progress for %s:\n%s", b.Name, stderr)
		}
	}
	fenced, naive := doc.Contenders[history.Fenced], doc.Contenders[history.Naive]
	if fenced.Findings.Lock.Verdict != history.FindingHeld || fenced.Findings.Writes.Verdict != history.FindingHeld || fenced.Verdict != "held" {
		t.Errorf("fenced over the battery: %+v", fenced)
	}
	if naive.Findings.Writes.Verdict != history.FindingBroken || !strings.Contains(naive.Verdict, "the expected finding of a naive discipline") {
		t.Errorf("naive over the battery: %+v", naive)
	}
	if n := fenced.Findings.Coverage.Counts; n == nil || n.Takeovers == 0 || n.LostRepliesRetried == 0 || n.LateReleases == 0 {
		t.Errorf("fenced coverage summed over the battery: %+v", n)
	}
}

// Bad input to lab run battery, and --stop-at-first where it cannot end a
// run early: exit 2, naming why, before anything runs.
func TestRunBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "battery", "overlap"}, "lab run battery: takes no arguments"},
		{[]string{"run", "battery", "--contenders", "redsync"}, "lab run battery: --contenders: contender redsync: a library's lock runs in real time, not on the simulator"},
		{[]string{"run", "battery", "--contenders", "nosuch"}, "contender nosuch: no contender has that name"},
		{[]string{"run", "overlap", "--stop-at-first"}, "lab run: --stop-at-first: the simulator runs the whole scenario in virtual time"},
		{[]string{"run", "overlap", "--backend", "etcd", "--agents-as", "process", "--stop-at-first"},
			"lab run: --stop-at-first: --agents-as process: the watch that stops a run at its first counterexample hears the events of agents in-process only"},
		{[]string{"run", "lock-delay", "--backend", "memory", "--lock-delays", "0,1s", "--stop-at-first"},
			"lab run: --lock-delays runs the scenario many times and prints one table of its counts: no --stop-at-first"},
	} {
		code, stdout, stderr := runLab(tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
