package history

import (
	"strings"
	"testing"
)

// Each history's findings put each violation where its fault lies: the
// lock's own (exclusion, the lease contract, fences, containment) or the
// write path's (stale writes, the gate's refusals and admissions); a
// naive discipline's stale writes are the expected finding, with the
// remedy, beside a lock that held; and a run with no takeover never says
// the lock held.
func TestFindings(t *testing.T) {
	for _, tc := range []struct {
		file, mode    string
		lock, writes  string
		reasonHas     string // in the lock or writes finding's reason
		takeoversSeen int
	}{
		{"lock_grants_twice", "lock", FindingBroken, FindingHeld, "mutual-exclusion violation", 1},
		{"naive_stale_write", "naive", FindingHeld, FindingBroken, "the lock kept exclusion; writes without a fence landed 1 stale write", 1},
		{"stale_write", "fenced", FindingHeld, FindingBroken, "1 stale write landed through the gate", 1},
		{"unexplained_refusal", "fenced", FindingHeld, FindingBroken, "1 refusal whose floor the history does not bear out", -1},
		{"fence_reuse", "fenced", FindingBroken, FindingInconclusive, "reused with no restart", -1},
		{"release_of_lapsed_lease", "fenced", FindingBroken, FindingInconclusive, "release granted by the coordinator of a lease no longer live", -1},
		{"vacuous", "fenced", FindingInconclusive, FindingInconclusive, "no takeover tested exclusion", 0},
		{"refused_overlap", "fenced", FindingHeld, FindingHeld, "the lock kept exclusion over 1 takeover", 1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, events, err := ReadFile("testdata/" + tc.file + ".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			r := Check(h, events).Modes[Mode(tc.mode)]
			f := r.Findings
			if f.Lock.Verdict != tc.lock || f.Writes.Verdict != tc.writes {
				t.Fatalf("lock %+v, writes %+v: want %s, %s", f.Lock, f.Writes, tc.lock, tc.writes)
			}
			if !strings.Contains(f.Lock.Reason+" | "+f.Writes.Reason, tc.reasonHas) {
				t.Errorf("the reasons %q | %q lack %q", f.Lock.Reason, f.Writes.Reason, tc.reasonHas)
			}
			if f.Coverage.Counts == nil || (tc.takeoversSeen >= 0 && f.Coverage.Counts.Takeovers != tc.takeoversSeen) || f.Coverage.Counts.Takeovers != r.Takeovers {
				t.Errorf("coverage counts %+v, takeovers %d", f.Coverage.Counts, r.Takeovers)
			}
			if f.Coverage.Verdict == FindingHeld && len(r.NotExercised) > 0 {
				t.Errorf("coverage held with %q not exercised", r.NotExercised)
			}
		})
	}
}
