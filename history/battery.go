package history

import (
	"fmt"
	"strings"
)

// BatteryRun is one scenario of a battery as one mode ran it: the
// scenario's name and the checker's report of the mode.
type BatteryRun struct {
	Scenario string
	Report   *Report
}

// BatteryFindings are one mode's findings summed over the scenarios of a
// battery it ran. The lock is broken if it was in any scenario (each
// scenario's reason, named); else held if any scenario put exclusion to
// the test, judged by the contract's paths the battery exercised as a
// whole; else inconclusive. The writes likewise: broken in any, else held
// in any, else inconclusive. The coverage counts are the scenarios' sums,
// and what not one scenario exercised is not exercised by the battery.
// None of them says held for what no scenario put to the test.
func BatteryFindings(runs []BatteryRun) Findings {
	if len(runs) == 0 {
		none := Finding{Verdict: FindingInconclusive, Reason: "no scenario of the battery ran"}
		return Findings{Lock: none, Writes: none, Coverage: none}
	}
	n := &CoverageCounts{}
	takeovers := 0
	notAll := map[string]int{} // how many scenarios did not exercise each property
	var order []string
	for _, run := range runs {
		c := run.Report.Findings.Coverage.Counts
		if c != nil {
			n.Add(c)
		}
		takeovers += run.Report.Takeovers
		for _, p := range run.Report.NotExercised {
			if notAll[p] == 0 {
				order = append(order, p)
			}
			notAll[p]++
		}
	}
	var notExercised []string
	for _, p := range order {
		if notAll[p] == len(runs) {
			notExercised = append(notExercised, p)
		}
	}
	lock := lockFinding(runs[0].Report.Contender, takeovers, n, nil)
	if broken := brokenIn(runs, func(f *Findings) Finding { return f.Lock }); broken != "" {
		lock = Finding{Verdict: FindingBroken, Reason: broken}
	}
	return Findings{Lock: lock, Writes: batteryWrites(runs), Coverage: coverageFinding(notExercised, n)}
}

// batteryWrites is the writes finding of a battery: broken in any
// scenario, else held in any, else inconclusive in all.
func batteryWrites(runs []BatteryRun) Finding {
	if stale, ok := naiveStale(runs); ok {
		return stale
	}
	if broken := brokenIn(runs, func(f *Findings) Finding { return f.Writes }); broken != "" {
		return Finding{Verdict: FindingBroken, Reason: broken}
	}
	var held, why []string
	for _, run := range runs {
		f := run.Report.Findings.Writes
		if f.Verdict == FindingHeld {
			held = append(held, run.Scenario+" ("+f.Reason+")")
		} else {
			why = append(why, run.Scenario+": "+f.Reason)
		}
	}
	if len(held) > 0 {
		return Finding{Verdict: FindingHeld, Reason: "no stale write landed: " + strings.Join(held, "; ")}
	}
	return Finding{Verdict: FindingInconclusive, Reason: "in no scenario could a write be stale: " + strings.Join(why, "; ")}
}

// naiveStale is the writes finding of a naive discipline's battery whose
// writes broke by stale writes alone, in one sentence with the remedy, as
// a run's says it: ok is false if any scenario's writes broke otherwise
// (or the discipline is not naive).
func naiveStale(runs []BatteryRun) (Finding, bool) {
	stale, exclusion := 0, 0
	var where []string
	for _, run := range runs {
		r := run.Report
		if r.Findings.Writes.Verdict != FindingBroken {
			continue
		}
		if r.Contender.Discipline != DisciplineNaive || r.StaleWritesLanded == 0 || r.UnexplainedLandings > 0 {
			return Finding{}, false
		}
		stale += r.StaleWritesLanded
		exclusion += r.MutualExclusionViolations
		where = append(where, fmt.Sprintf("%s %d", run.Scenario, r.StaleWritesLanded))
	}
	if stale == 0 {
		return Finding{}, false
	}
	kept := "the lock kept exclusion; "
	if exclusion > 0 {
		kept = "the lock broke exclusion too (see the lock finding); "
	}
	return Finding{Verdict: FindingBroken, Reason: kept + "writes without a fence landed " + Plural(stale, "stale write", "stale writes") +
		" (" + strings.Join(where, ", ") + ")" + staleCause + Remedy}, true
}

// brokenIn says each scenario whose finding (of) is broken, with its
// reason; "" for none.
func brokenIn(runs []BatteryRun, of func(*Findings) Finding) string {
	var out []string
	for _, run := range runs {
		if f := of(&run.Report.Findings); f.Verdict == FindingBroken {
			out = append(out, fmt.Sprintf("on %s: %s", run.Scenario, f.Reason))
		}
	}
	return strings.Join(out, "; ")
}

// Add adds o's counts to n's.
func (n *CoverageCounts) Add(o *CoverageCounts) {
	n.ContendedGrants += o.ContendedGrants
	n.ExpiriesOfLiveHolders += o.ExpiriesOfLiveHolders
	n.Renewals += o.Renewals
	n.RenewalsAfterExpiry += o.RenewalsAfterExpiry
	n.Releases += o.Releases
	n.LateReleases += o.LateReleases
	n.Takeovers += o.Takeovers
	n.LostRepliesRetried += o.LostRepliesRetried
}
