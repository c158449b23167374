package history

import (
	"fmt"
	"slices"
	"strings"

	"github.com/leasefence/lab/leasefence"
)

// Findings are a mode's verdict in three parts, each on its own evidence:
// the lock's own safety, the write path, and what the run exercised. A
// lock that kept exclusion is never blamed for what its holders' writes
// did without a fence, and nothing is said to have held that the run did
// not put to the test. They are computed once, by the Checker's Report,
// from its counters; every output (the report, labtest, the exit status)
// reads them.
type Findings struct {
	// Lock: mutual exclusion and the lease contract, the lock's own fault.
	Lock Finding `json:"lock"`
	// Writes: stale writes landed under the mode's discipline.
	Writes Finding `json:"writes"`
	// Coverage: what the run exercised; Counts says how much of each.
	Coverage Finding `json:"coverage"`
}

// Finding is one part of a verdict: FindingHeld, FindingBroken,
// FindingInconclusive or FindingNA, and why.
type Finding struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Counts is the coverage finding's counters (nil for the others).
	Counts *CoverageCounts `json:"counts,omitempty"`
}

// The verdicts of a Finding.
const (
	FindingHeld   = "held"
	FindingBroken = "broken"
	// FindingInconclusive: the run never put the property to the test;
	// it is never said to have held.
	FindingInconclusive = "inconclusive"
	// FindingNA: a property the lock's API cannot express.
	FindingNA = "n/a"
)

// CoverageCounts are what a run exercised of a lock.
type CoverageCounts struct {
	// ContendedGrants: grants of a resource an acquirer had been denied
	// since its previous grant.
	ContendedGrants int `json:"contended_grants"`
	// ExpiriesOfLiveHolders: takeovers of a lease whose holder had
	// neither released it nor given it up: its lease ended under it.
	ExpiriesOfLiveHolders int `json:"expiries_of_live_holders"`
	Renewals              int `json:"renewals"`
	// RenewalsAfterExpiry: renewals sent for a lease the record shows had
	// already ended (expired, released, taken over or forgotten).
	RenewalsAfterExpiry int `json:"renewals_after_expiry"`
	Releases            int `json:"releases"`
	// LateReleases: releases the lock answered, granted or refused, of a
	// lease the record shows had already ended (a duplicate of a release
	// that had let it go, a release after a takeover).
	LateReleases int `json:"late_releases"`
	Takeovers    int `json:"takeovers"`
	// LostRepliesRetried: acquires resent after their request or reply
	// was lost.
	LostRepliesRetried int `json:"lost_replies_retried"`
}

// String says the counts in a sentence.
func (n *CoverageCounts) String() string {
	return fmt.Sprintf("counts: contended grants %d, expiries of live holders %d, renewals %d (%d sent after the end), "+
		"releases %d (%d answered after the end), takeovers %d, lost replies retried %d", n.ContendedGrants, n.ExpiriesOfLiveHolders,
		n.Renewals, n.RenewalsAfterExpiry, n.Releases, n.LateReleases, n.Takeovers, n.LostRepliesRetried)
}

// coverage is the fold of a mode's CoverageCounts that the Checker's
// other counters do not have: per resource, whether an acquirer was denied
// since its last grant, and whether that grant's holder gave it up.
type coverage struct {
	h                       *Header
	denied, gaveUp, granted []bool
	// lastFence is each resource's newest grant, which LeaseAbandoned and
	// Released must name to count as its holder giving it up.
	lastFence                                       []uint64
	contended, liveExpiries, renewLate, releaseLate int
	lostRetried                                     int
	lost                                            map[string]bool // request ids whose request or reply was lost
	// lateRenew holds the renewals sent after their lease had ended,
	// until their answer; renewedLate counts those the lock answered OK
	// (the lease contract's breach), the first few in renewedLateCx.
	lateRenew     map[string]bool
	renewedLate   int
	renewedLateCx []Counterexample
	// unmatched counts the refusals of a renewal or release of a lease
	// that had ended whose error did not match ErrNotHeld
	// (ReasonNotHeldUnmatched), the first few in unmatchedCx.
	unmatched   int
	unmatchedCx []Counterexample
}

// ReasonNotHeldUnmatched is the reason a refusal of a renewal or release
// records when a contender lock's Renew or Release returned an error that
// does not match ErrNotHeld (realtime.Lease): the checker holds it against
// the lease contract where the record shows the lease had ended. An error
// that matches is recorded as leasefence.ReasonExpired.
const ReasonNotHeldUnmatched leasefence.Reason = "not-held-unmatched"

func newCoverage(h *Header) *coverage {
	resources := len(h.Resources)
	return &coverage{h: h, denied: make([]bool, resources), gaveUp: make([]bool, resources), granted: make([]bool, resources),
		lastFence: make([]uint64, resources), lost: make(map[string]bool), lateRenew: make(map[string]bool)}
}

// add folds in e, which the Reader and the rules have already taken
// (their record of which generations ended is as of e).
func (v *coverage) add(e *Event, rd *Reader) {
	r := e.Resource
	inRange := r >= 0 && r < len(v.denied)
	switch e.Kind {
	case Denied:
		if inRange {
			v.denied[r] = true
		}
	case Granted:
		if !inRange {
			return
		}
		if v.denied[r] {
			v.contended++
		}
		if v.granted[r] && !v.gaveUp[r] && !v.endedBeforeGrant(rd, r) {
			v.liveExpiries++
		}
		v.denied[r], v.gaveUp[r], v.granted[r], v.lastFence[r] = false, false, true, uint64(e.Fence)
	case LeaseAbandoned, Released:
		if inRange && uint64(e.Fence) == v.lastFence[r] {
			v.gaveUp[r] = true
		}
	case RequestSent:
		if e.Request == RequestRenew && ended(rd, e) {
			v.renewLate++
			v.lateRenew[e.RequestID] = true
		}
	case Renewed:
		if v.lateRenew[e.RequestID] {
			delete(v.lateRenew, e.RequestID)
			v.renewedLate++
			if len(v.renewedLateCx) < MaxCounterexamples {
				v.renewedLateCx = append(v.renewedLateCx, Counterexample{Kind: RenewedAfterEnd, AtMS: ms(e.At), Fence: e.Fence,
					Resource: name(v.h.Resources, r), Holder: name(v.h.Agents, e.Agent),
					Detail: "a renewal sent after its lease had ended was answered OK: the lock renewed a lease it no longer held"})
			}
		}
	case RenewRefused:
		if v.lateRenew[e.RequestID] && e.Reason == ReasonNotHeldUnmatched {
			v.unmatchedAnswer(e, "Renew")
		}
		delete(v.lateRenew, e.RequestID)
	case ReleaseRefused:
		if !ended(rd, e) {
			break
		}
		v.releaseLate++
		if _, na := v.h.NotExpressible(e.Mode, RuleReleaseAfterEnd); e.Reason == ReasonNotHeldUnmatched && !na {
			v.unmatchedAnswer(e, "Release")
		}
	case RequestDropped, ReplyDropped:
		if e.RequestID != "" {
			v.lost[e.RequestID] = true
		}
	case RequestRetried:
		if v.lost[e.RequestID] {
			v.lostRetried++
			delete(v.lost, e.RequestID)
		}
	}
}

// unmatchedAnswer counts e, a refusal of call (Renew, Release) of a lease
// that had ended, answered with an error not matching ErrNotHeld.
func (v *coverage) unmatchedAnswer(e *Event, call string) {
	v.unmatched++
	if len(v.unmatchedCx) < MaxCounterexamples {
		v.unmatchedCx = append(v.unmatchedCx, Counterexample{Kind: NotHeldAnswer, AtMS: ms(e.At), Fence: e.Fence,
			Resource: name(v.h.Resources, e.Resource), Holder: name(v.h.Agents, e.Agent),
			Detail: "the lock answered " + call + " of a lease that had ended with an error that does not match ErrNotHeld"})
	}
}

// name is names[i], or "" for an index out of range.
func name(names []string, i int) string {
	if i < 0 || i >= len(names) {
		return ""
	}
	return names[i]
}

// ended reports whether the generation e names had ended (an expiry, a
// release, a takeover or a restart the record shows) before e.
func ended(rd *Reader, e *Event) bool {
	gi := rd.Find(e.Incarnation, e.Resource, e.Fence)
	if gi < 0 {
		return false
	}
	g := rd.Generation(gi)
	return g.ended || g.Lapsed()
}

// endedBeforeGrant reports whether the previous generation of resource r
// (the one before the grant the Reader has just folded in) was released
// or forgotten: its end was no expiry under a live holder.
func (v *coverage) endedBeforeGrant(rd *Reader, r int) bool {
	latest := rd.Latest(r)
	if latest < 0 {
		return true
	}
	prev := rd.Generation(latest).prev
	if prev < 0 {
		return true
	}
	g := rd.Generation(prev)
	return g.Released || g.Forgot
}

// counts returns the coverage counters of r, a report in the making.
func (c *Checker) counts(r *Report) *CoverageCounts {
	v := c.coverage
	return &CoverageCounts{ContendedGrants: v.contended, ExpiriesOfLiveHolders: v.liveExpiries, Renewals: r.Renewals,
		RenewalsAfterExpiry: v.renewLate, Releases: r.Releases, LateReleases: v.releaseLate + r.UnexplainedReleases, Takeovers: r.Takeovers,
		LostRepliesRetried: v.lostRetried}
}

// staleCause says, after the count of a naive discipline's stale writes,
// why they landed and whose fault they are not.
const staleCause = ": a paused holder wrote after its lease ended (expected of a naive discipline, not the lock's fault); "

// Remedy is what the writes finding names as the remedy for stale writes
// landed without a fence.
const Remedy = "the remedy: write through a gate that checks the lock's fencing token (a lock without one needs a fence, " +
	"or a lock-delay where the resource cannot check one)"

// findings judges r, a report whose counters are in, in three parts:
// lock and writes are its violations that are the lock's own and the
// write path's (the gate's).
func (c *Checker) findings(r *Report, lock, writes []string) Findings {
	n := c.counts(r)
	return Findings{Lock: lockFinding(r.Contender, r.Takeovers, n, lock), Writes: c.writesFinding(r, writes), Coverage: coverageFinding(r.NotExercised, n)}
}

// lockFinding: broken by any violation of the lock's own; else held only
// if a takeover put exclusion to the test, and its reason says which rules
// of the lease contract the run put to the test, never claiming the
// others; a rule the lock's API cannot express is n/a, with why, whatever
// the verdict.
func lockFinding(ct Contender, takeovers int, n *CoverageCounts, broken []string) Finding {
	var tested, untested, na []string
	for _, p := range contractPaths(n) {
		if why, ok := ct.NotExpressible[p.rule]; ok {
			na = append(na, p.what+": "+FindingNA+" ("+why+")")
		} else if p.n > 0 {
			tested = append(tested, p.what)
		} else {
			untested = append(untested, p.what)
		}
	}
	switch {
	case len(broken) > 0:
		return Finding{Verdict: FindingBroken, Reason: strings.Join(append(broken, na...), "; ")}
	case takeovers == 0:
		return Finding{Verdict: FindingInconclusive, Reason: strings.Join(append([]string{
			"no lease ended without a release, so no takeover tested exclusion"}, na...), "; ")}
	}
	reason := "the lock kept exclusion over " + Plural(takeovers, "takeover", "takeovers")
	if ct.Generations != "" {
		reason += " (a Deadline past what the server granted would have shown as a grant while it ran)"
	}
	if len(tested) > 0 {
		reason += "; it kept the contract of " + strings.Join(tested, " and ")
	}
	if len(untested) > 0 {
		reason += "; " + strings.Join(untested, " and ") + " not exercised, so not judged"
	}
	return Finding{Verdict: FindingHeld, Reason: strings.Join(append([]string{reason}, na...), "; ")}
}

// contractPaths are the rules of the lease contract the record can show a
// lock breaking, each with how often the run exercised it; rule names
// those a lock's API may be unable to express (Contender.NotExpressible).
func contractPaths(n *CoverageCounts) []struct {
	what string
	rule ContractRule
	n    int
} {
	return []struct {
		what string
		rule ContractRule
		n    int
	}{{"Release after a lease's end", RuleReleaseAfterEnd, n.LateReleases}, {"Renew after a lease's end", "", n.RenewalsAfterExpiry}}
}

// writesFinding: broken by a violation of the write path's (a fenced
// discipline's stale writes through the gate among them), or, naive, by
// stale writes, the expected finding; inconclusive when no write could be
// stale.
func (c *Checker) writesFinding(r *Report, broken []string) Finding {
	fenced := c.h.Fenced(c.mode)
	switch {
	case len(broken) > 0:
		return Finding{Verdict: FindingBroken, Reason: strings.Join(broken, "; ")}
	case r.StaleWritesLanded > 0:
		kept := "your lock kept exclusion; "
		if r.Contender.Library == LabLibrary {
			kept = "the lock kept exclusion; "
		}
		if r.MutualExclusionViolations > 0 {
			kept = "the lock broke exclusion too (see the lock finding); "
		} else if r.Takeovers == 0 {
			kept = ""
		}
		return Finding{Verdict: FindingBroken, Reason: kept + "writes without a fence landed " +
			Plural(r.StaleWritesLanded, "stale write", "stale writes") + staleCause + Remedy}
	case r.Vacuous:
		return Finding{Verdict: FindingInconclusive, Reason: "no write was made, so no write could be stale"}
	case r.Overlaps == 0 && r.CommitsRefused == 0:
		return Finding{Verdict: FindingInconclusive, Reason: "no two holders acted on a resource at once, so no write could be stale"}
	case fenced:
		refused := Plural(r.CommitsRefused, "write", "writes") + " refused"
		if r.LeaseRefusals > 0 {
			refused += fmt.Sprintf(", %d for a lease no longer live", r.LeaseRefusals)
		}
		return Finding{Verdict: FindingHeld, Reason: "no stale write landed through the gate (" + refused + ")" + lapsedNote(r)}
	}
	return Finding{Verdict: FindingHeld, Reason: fmt.Sprintf("no stale write landed over %s", Plural(r.Overlaps, "overlap", "overlaps")) + lapsedNote(r)}
}

// lapsedNote says, after a held writes finding, how many writes landed
// after their lease ended, before a newer holder's write: not stale, and
// the window only a gate that checks the lease closes.
func lapsedNote(r *Report) string {
	if r.LapsedWritesLanded == 0 {
		return ""
	}
	return "; " + Plural(r.LapsedWritesLanded, "write", "writes") + " landed after " +
		map[bool]string{true: "its", false: "their"}[r.LapsedWritesLanded == 1] +
		" lease ended, before a newer holder wrote: a floor admits such writes, a gate that checks the lease refuses them"
}

// coverageFinding: held when the run exercised every property it judges
// (not lists those it did not, from the other rules) and every path of
// the lease contract; else inconclusive, naming what it did not.
func coverageFinding(notExercised []string, n *CoverageCounts) Finding {
	not := slices.Clone(notExercised)
	for _, p := range contractPaths(n) {
		if p.n == 0 {
			not = append(not, p.what)
		}
	}
	if len(not) == 0 {
		return Finding{Verdict: FindingHeld, Reason: "the run exercised every property judged", Counts: n}
	}
	return Finding{Verdict: FindingInconclusive, Reason: "not exercised: " + strings.Join(not, "; "), Counts: n}
}
