package history

import (
	"errors"
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

// A release the lock answered nil for a lease no longer live breaks the
// lease contract of a contender whose API can say "not held", and is n/a,
// never charged, for one whose header declares it cannot express that
// rule; the coverage counts it either way.
func TestFindingsReleaseAfterEndNotExpressible(t *testing.T) {
	h, events, err := ReadFile("testdata/release_after_end_not_expressible.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	res := Check(h, events)
	for _, tc := range []struct {
		mode, lock, reasonHas string
		violations, cx        int
	}{
		{"lib-na", FindingHeld, "Release after a lease's end: n/a (its Unlock is a delete that cannot say the lease was gone)", 0, 0},
		{"lib-strict", FindingBroken, "1 release" + ReleaseContractViolation, 1, 1},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := res.Modes[Mode(tc.mode)]
			f := r.Findings
			if f.Lock.Verdict != tc.lock || !strings.Contains(f.Lock.Reason, tc.reasonHas) {
				t.Errorf("lock %+v: want %s with %q", f.Lock, tc.lock, tc.reasonHas)
			}
			if len(r.Violations) != tc.violations || len(r.Counterexamples) != tc.cx {
				t.Errorf("violations %q, counterexamples %+v: want %d and %d", r.Violations, r.Counterexamples, tc.violations, tc.cx)
			}
			if f.Coverage.Counts.LateReleases != 1 || r.UnexplainedReleases != 1 {
				t.Errorf("late releases %d, unexplained %d: want 1 and 1", f.Coverage.Counts.LateReleases, r.UnexplainedReleases)
			}
		})
	}
}

// A header that declares away a rule the contract does not name, or one
// without why, is refused.
func TestNotExpressibleValidated(t *testing.T) {
	for _, ne := range []map[ContractRule]string{{"renew-after-end-ish": "why"}, {RuleReleaseAfterEnd: ""}} {
		h := Header{Modes: []Mode{"lib"}, Contenders: []Contender{{Name: "lib", Discipline: DisciplineNaive, NotExpressible: ne}}}
		if err := h.validateContenders(); !errors.Is(err, ErrBadHistory) {
			t.Errorf("not_expressible %v: %v, want ErrBadHistory", ne, err)
		}
	}
}
