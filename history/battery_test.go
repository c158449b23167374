package history_test

import (
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
)

// A battery's findings: broken in any scenario is broken, naming it; held
// needs one scenario that put the property to the test; the coverage is
// summed, and what one scenario exercised is exercised by the battery.
func TestBatteryFindings(t *testing.T) {
	ct := history.Contender{Name: "lock", Generations: "fence", Fence: true, Discipline: history.DisciplineFenced}
	report := func(takeovers int, lock, writes string, notExercised []string, n history.CoverageCounts) *history.Report {
		return &history.Report{Contender: ct, Takeovers: takeovers, NotExercised: notExercised, Findings: history.Findings{
			Lock: history.Finding{Verdict: lock, Reason: "lock " + lock}, Writes: history.Finding{Verdict: writes, Reason: "writes " + writes},
			Coverage: history.Finding{Counts: &n}}}
	}
	untested := []string{history.NotExercisedExclusion}
	naiveStale := func(r *history.Report, stale int) *history.Report {
		r.Contender.Discipline, r.StaleWritesLanded = history.DisciplineNaive, stale
		return r
	}
	for _, tc := range []struct {
		name                   string
		runs                   []history.BatteryRun
		lock, writes, coverage string
		reason                 string // in the lock's reason
	}{
		{"one scenario tests what the other does not", []history.BatteryRun{
			{"a", report(0, history.FindingInconclusive, history.FindingInconclusive, untested, history.CoverageCounts{Releases: 3, LateReleases: 2})},
			{"b", report(4, history.FindingHeld, history.FindingHeld, nil, history.CoverageCounts{Takeovers: 4, RenewalsAfterExpiry: 1})},
		}, history.FindingHeld, history.FindingHeld, history.FindingHeld, "it kept the contract of Release after a lease's end and Renew after a lease's end"},
		{"broken in one", []history.BatteryRun{
			{"a", report(2, history.FindingHeld, history.FindingHeld, nil, history.CoverageCounts{Takeovers: 2})},
			{"b", report(1, history.FindingBroken, history.FindingHeld, nil, history.CoverageCounts{Takeovers: 1})},
		}, history.FindingBroken, history.FindingHeld, history.FindingInconclusive, "on b: lock broken"},
		{"nothing tested exclusion", []history.BatteryRun{
			{"a", report(0, history.FindingInconclusive, history.FindingInconclusive, untested, history.CoverageCounts{LateReleases: 1})},
			{"b", report(0, history.FindingInconclusive, history.FindingInconclusive, untested, history.CoverageCounts{RenewalsAfterExpiry: 1})},
		}, history.FindingInconclusive, history.FindingInconclusive, history.FindingInconclusive, "no takeover tested exclusion"},
		{"a naive discipline's stale writes, summed", []history.BatteryRun{
			{"a", naiveStale(report(2, history.FindingHeld, history.FindingBroken, nil, history.CoverageCounts{Takeovers: 2}), 4)},
			{"b", naiveStale(report(1, history.FindingHeld, history.FindingBroken, nil, history.CoverageCounts{Takeovers: 1}), 20)},
		}, history.FindingHeld, history.FindingBroken, history.FindingInconclusive, "kept exclusion over 3 takeovers"},
		{"no scenario", nil, history.FindingInconclusive, history.FindingInconclusive, history.FindingInconclusive, "no scenario of the battery ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := history.BatteryFindings(tc.runs)
			if f.Lock.Verdict != tc.lock || f.Writes.Verdict != tc.writes || f.Coverage.Verdict != tc.coverage || !strings.Contains(f.Lock.Reason, tc.reason) {
				t.Errorf("got lock %+v, writes %+v, coverage %+v; want %s (%q), %s, %s", f.Lock, f.Writes, f.Coverage, tc.lock, tc.reason, tc.writes, tc.coverage)
			}
			if tc.writes == history.FindingBroken && !strings.HasPrefix(f.Writes.Reason, "the lock kept exclusion; writes without a fence landed 24 stale writes (a 4, b 20): a paused holder") {
				t.Errorf("the naive stale writes, summed: %q", f.Writes.Reason)
			}
			if len(tc.runs) == 2 && tc.coverage == history.FindingHeld {
				if n := f.Coverage.Counts; n.Takeovers != 4 || n.LateReleases != 2 || n.Releases != 3 || n.RenewalsAfterExpiry != 1 {
					t.Errorf("counts not summed: %+v", n)
				}
			}
		})
	}
}
