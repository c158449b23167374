package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
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

// grantingLock grants every Acquire: two holders at once.
type grantingLock struct{}

func (grantingLock) Acquire(_ context.Context, _, _ string, ttl time.Duration) (realtime.Lease, error) {
	return grantingLease{time.Now().Add(ttl)}, nil
}

type grantingLease struct{ deadline time.Time }

func (l grantingLease) Deadline() time.Time         { return l.deadline }
func (grantingLease) Fence() (uint64, bool)         { return 0, false }
func (grantingLease) Renew(context.Context) error   { return nil }
func (grantingLease) Release(context.Context) error { return nil }

// A lock that breaks exclusion fails the battery (exit 1), its verdict
// BROKEN; with --stop-at-first its first run ends at the first
// counterexample, and the battery with it, within seconds.
func TestBatteryStopsAtFirstCounterexample(t *testing.T) {
	t.Parallel()
	out, errb := &strings.Builder{}, &strings.Builder{}
	a := &app{stdout: out, stderr: errb, onSetup: func(s *realtime.Setup) {
		s.Backend = &realtime.Contender{Info: history.Contender{Library: "grants every acquire", Discipline: history.DisciplineNaive,
			Generations: realtime.GenerationsObserved}, New: func(context.Context, history.Mode) (realtime.Lock, error) { return grantingLock{}, nil }}
	}}
	began := time.Now()
	code := a.main(t.Context(), []string{"run", "battery", "--backend", "memory", "--mode", "naive", "--stop-at-first"})
	took := time.Since(began)
	t.Logf("exit %d after %s\n%s", code, took, errb.String())
	if code != exitFailed || !strings.Contains(errb.String(), "stopped at contention, the first scenario where a lock broke") ||
		!strings.Contains(out.String(), "verdict:  BROKEN: the lock broke its own safety") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if took > 6*time.Second {
		t.Errorf("the battery took %s: it did not stop at the first counterexample of its 7s first scenario", took)
	}
}

func TestBatteryBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "battery", "overlap"}, "lab run battery: takes no arguments"},
		{[]string{"run", "battery", "--contenders", "redsync"}, "lab run battery: --contenders: contender redsync: a library's lock runs in real time, not on the simulator"},
		{[]string{"run", "battery", "--contenders", "nosuch"}, "contender nosuch: no contender has that name"},
	} {
		code, stdout, stderr := runLab(tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
