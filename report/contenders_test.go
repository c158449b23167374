package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
)

// Each contender has its verdict, in the text and in the JSON: a naive
// lock's stale writes are a finding (unsafe), a fenced one's broken
// invariant a failure, and the lab's own verdict names only its own.
func TestContenderVerdicts(t *testing.T) {
	redsync := history.Contender{Name: "redsync", Library: "github.com/go-redsync/redsync/v4", Version: "v4.18.1", Discipline: history.DisciplineNaive, Generations: "observed"}
	mutex := history.Contender{Name: "etcd-mutex-fenced", Library: "go.etcd.io/etcd/client/v3/concurrency", Fence: true, Discipline: history.DisciplineFenced}
	finding := func(lock, writes string) history.Findings {
		return history.Findings{Lock: history.Finding{Verdict: lock, Reason: "the lock: " + lock},
			Writes: history.Finding{Verdict: writes, Reason: "the writes: " + writes}, Coverage: history.Finding{Verdict: history.FindingHeld,
				Reason: "covered", Counts: &history.CoverageCounts{Takeovers: 2}}}
	}
	res := &history.Result{Scenario: "s", Modes: map[history.Mode]*history.Report{
		history.Fenced: {Mode: history.Fenced, Contender: history.Contender{Name: history.Fenced, Library: history.LabLibrary, Fence: true,
			Discipline: history.DisciplineFenced}, CommitsAdmitted: 3, CommitsRefused: 2, Takeovers: 2,
			Findings: finding(history.FindingHeld, history.FindingHeld)},
		"redsync": {Mode: "redsync", Contender: redsync, CommitsAdmitted: 5, StaleWritesLanded: 3, SilentOverlaps: 2, MutualExclusionViolations: 1,
			Findings: finding(history.FindingHeld, history.FindingBroken)},
		"etcd-mutex-fenced": {Mode: "etcd-mutex-fenced", Contender: mutex, CommitsAdmitted: 4, Violations: []string{"1 stale write landed through the gate"},
			Findings: finding(history.FindingHeld, history.FindingBroken)},
	}}
	var b bytes.Buffer
	if err := JSON(&b, res, Stop{}, Runner{Backend: "memory"}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Verdict string
		Modes   map[string]struct {
			Verdict                   string
			MutualExclusionViolations int `json:"mutual_exclusion_violations"`
			Contender                 history.Contender
		}
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Verdict != VerdictBroken || got.Modes["redsync"].Verdict != VerdictUnsafe || got.Modes["etcd-mutex-fenced"].Verdict != VerdictBroken ||
		got.Modes["fenced"].Verdict != VerdictHeld || got.Modes["redsync"].MutualExclusionViolations != 1 || !reflect.DeepEqual(got.Modes["redsync"].Contender, redsync) {
		t.Errorf("JSON %s", b.String())
	}
	b.Reset()
	Text(&b, &history.Header{}, res, Stop{}, Runner{Backend: "memory"})
	text := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"verdict: the fenced mode held its invariants",
		"VERDICT for etcd-mutex-fenced (go.etcd.io/etcd/client/v3/concurrency, fenced): BROKE ITS INVARIANTS: 1 stale write landed through the gate.",
		"redsync (github.com/go-redsync/redsync/v4 v4.18.1, naive) landed 3 stale writes (2 overlaps were silent); 1 mutual-exclusion violation: " +
			"the lock granted a resource while an earlier lease on it still ran (generations in the order the lab saw the grants: the server shows none).",
		"exclusion violations 0 0 1",
		"redsync (github.com/go-redsync/redsync/v4 v4.18.1, naive): lock held the lock: held. writes broken the writes: broken. " +
			"coverage held covered. counts: contended grants 0, expiries of live holders 0, renewals 0 (0 sent after the end), releases 0 (0 answered after the end), takeovers 2",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(text, "bug in the leasefence library") {
		t.Errorf("a library contender's broken invariant blamed on the leasefence library:\n%s", b.String())
	}
}
