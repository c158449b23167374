package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/leasefence/lab/history"
)

// reportRow is one line of the report's table: a counter of each mode's
// report, by its JSON name.
type reportRow struct {
	label string
	get   func(*history.Report) int
	// rare rows are shown only when a mode counted something: most runs
	// never restart a coordinator, and a row of zeros says nothing.
	rare bool
	// contenders: a rare row shown whenever a library contender ran, for
	// its zeros are a finding of the comparison.
	contenders bool
}

// shownRows returns the rows of the report's table for res.
func shownRows(res *history.Result) []reportRow {
	rows := make([]reportRow, 0, len(reportRows))
	for _, row := range reportRows {
		shown := !row.rare
		for _, rep := range res.Modes {
			shown = shown || row.get(rep) != 0 || (row.contenders && !ownContender(rep))
		}
		if shown {
			rows = append(rows, row)
		}
	}
	return rows
}

var reportRows = []reportRow{
	{"acquisitions", func(r *history.Report) int { return r.Acquisitions }, false, false},
	{"renewals", func(r *history.Report) int { return r.Renewals }, false, false},
	{"denials", func(r *history.Report) int { return r.Denials }, false, false},
	{"expiries", func(r *history.Report) int { return r.Expiries }, false, false},
	{"releases", func(r *history.Report) int { return r.Releases }, false, false},
	{"fences minted", func(r *history.Report) int { return r.FencesMinted }, false, false},
	{"faults played", func(r *history.Report) int { return r.FaultsPlayed }, true, false},
	{"retries", func(r *history.Report) int { return r.Retries }, false, false},
	{"messages lost", func(r *history.Report) int { return r.MessagesLost }, false, false},
	{"checks failed", func(r *history.Report) int { return r.ChecksFailed }, false, false},
	{"pushes applied", func(r *history.Report) int { return r.PushesApplied }, false, false},
	{"commits admitted", func(r *history.Report) int { return r.CommitsAdmitted }, false, false},
	{"commits refused", func(r *history.Report) int { return r.CommitsRefused }, false, false},
	{"writes failed", func(r *history.Report) int { return r.WritesFailed }, true, false},
	{"stale writes landed", func(r *history.Report) int { return r.StaleWritesLanded }, false, false},
	{"idle while waiting (ms)", func(r *history.Report) int { return r.IdleWhileWaitingMS }, true, false},
	{"reissued writes landed", func(r *history.Report) int { return r.ReissuedWritesLanded }, true, false},
	{"lapsed writes landed", func(r *history.Report) int { return r.LapsedWritesLanded }, true, false},
	{"refused for the lease", func(r *history.Report) int { return r.LeaseRefusals }, true, false},
	{"overlaps", func(r *history.Report) int { return r.Overlaps }, false, false},
	{"silent overlaps", func(r *history.Report) int { return r.SilentOverlaps }, false, false},
	{"exclusion violations", func(r *history.Report) int { return r.MutualExclusionViolations }, true, true},
	{"refused overlaps", func(r *history.Report) int { return r.RefusedOverlaps }, false, false},
	{"containment breaches", func(r *history.Report) int { return r.ContainmentBreaches }, false, false},
	{"fence reuses", func(r *history.Report) int { return r.FenceReuses }, false, false},
	{"unexplained refusals", func(r *history.Report) int { return r.UnexplainedRefusals }, false, false},
	{"forgeries refused", func(r *history.Report) int { return r.ForgeriesRefused }, true, false},
	{"forgeries landed", func(r *history.Report) int { return r.ForgeriesLanded }, true, false},
	{"floors moved by forgers", func(r *history.Report) int { return r.ForgedFloorsMoved }, true, false},
}

// maxShownCounterexamples is how many counterexamples per mode the text
// report shows (the JSON has every one the harness kept).
const maxShownCounterexamples = 6

// Stop says how far an interrupted run (or a history read only in part)
// got; the zero value means it ran to its end.
type Stop struct {
	Interrupted bool
	At          time.Duration // the virtual instant it was stopped at, if known
	By          string        // what stopped it; "" means Ctrl-C
	// Interventions are the live interventions made while it ran (in a
	// dashboard), in order: the report lists every one.
	Interventions []history.Intervention
}

// ran is how much of the run's time the report covers: all of it, or up
// to the instant it was stopped at.
func (s Stop) ran(full time.Duration) string {
	if s.Interrupted && s.At > 0 && s.At < full {
		return history.FormatDuration(s.At) + " (of " + history.FormatDuration(full) + ")"
	}
	return history.FormatDuration(full)
}

// Text writes the human report of a run: a header, one column per mode of
// counters, the first counterexamples of each mode, the verdict, and how to
// read it all. The header names the scenario that ran, says which runner
// made the history (run), who took part on which lease terms, and what the
// scenario shows, all from h, the run's history header.
func Text(w io.Writer, h *history.Header, res *history.Result, stop Stop, run Runner) {
	w = history.PrintableWriter(w) // names, a description and details may come from a file
	modes := resultModes(res)
	fmt.Fprintf(w, "%s · seed %d · %s of %s time · %s · digest %s\n", res.Scenario, res.Seed,
		stop.ran(time.Duration(res.VirtualDurationMS)*time.Millisecond), run.timeKind(),
		history.Plural(res.Events, "event", "events"), res.Digest)
	run.write(w, res)
	fmt.Fprintln(w, h.Outline())
	if h.Description != "" {
		fmt.Fprintln(w, h.Description)
	}
	if stop.Interrupted {
		by := stop.By
		if by == "" {
			by = "Ctrl-C"
		}
		fmt.Fprintf(w, "INTERRUPTED at %s of virtual time: the counts below cover only what ran before %s.\n", history.FormatDuration(stop.At), by)
	}
	writeInterventions(w, stop.Interventions)
	fmt.Fprintln(w)

	widths := columnWidths(modes)
	fmt.Fprintf(w, "  %-22s", "")
	for i, m := range modes {
		fmt.Fprintf(w, " %*s", widths[i], m)
	}
	fmt.Fprintln(w)
	for _, row := range shownRows(res) {
		fmt.Fprintf(w, "  %-22s", row.label)
		for i, m := range modes {
			fmt.Fprintf(w, " %*d", widths[i], row.get(res.Modes[m]))
		}
		fmt.Fprintln(w)
	}
	writeVacuousRow(w, res, modes, widths)

	for _, m := range modes {
		cx := slices.Clone(res.Modes[m].Counterexamples)
		fmt.Fprintln(w)
		if len(cx) == 0 {
			fmt.Fprintf(w, "%s: no counterexamples.\n", m)
			continue
		}
		slices.SortStableFunc(cx, func(a, b history.Counterexample) int {
			switch {
			case a.AtMS < b.AtMS:
				return -1
			case a.AtMS > b.AtMS:
				return 1
			}
			return 0
		})
		shown := min(len(cx), maxShownCounterexamples)
		fmt.Fprintln(w, counterexamplesHeading(m, shown, len(cx)))
		for _, c := range cx[:shown] {
			fmt.Fprintf(w, "  %10s  %-18s %-6s %s\n", history.FormatMS(c.AtMS), c.Kind, c.Resource, describeParties(c, res.Modes[m].Contender.FenceWord()))
			fmt.Fprintf(w, "  %10s  %s\n", "", c.Detail)
		}
		if more := moreCounterexamples(res.Modes[m].MoreCounterexamples); more != "" {
			fmt.Fprintf(w, "  and %s (not kept: the report keeps the first %d of each kind)\n", more, history.MaxCounterexamples)
		}
	}

	fmt.Fprintln(w)
	writeVerdict(w, res)
	fmt.Fprintln(w)
	writeFindings(w, res)
	fmt.Fprintln(w)
	fmt.Fprint(w, howToRead)
	if run.real() {
		fmt.Fprint(w, realTimeNote)
	}
}

// writeVacuousRow says, under each mode that made no write at all, that
// its column is vacuous: its zeros are of nothing tested.
func writeVacuousRow(w io.Writer, res *history.Result, modes []history.Mode, widths []int) {
	if !slices.ContainsFunc(modes, func(m history.Mode) bool { return res.Modes[m].Vacuous }) {
		return
	}
	fmt.Fprintf(w, "  %-22s", "(no write made)")
	for i, m := range modes {
		cell := ""
		if res.Modes[m].Vacuous {
			cell = "vacuous"
		}
		fmt.Fprintf(w, " %*s", widths[i], cell)
	}
	fmt.Fprintln(w)
}

// columnWidths are the table's column widths: 8, or a contender's name's
// length where it is longer.
func columnWidths(modes []history.Mode) []int {
	widths := make([]int, len(modes))
	for i, m := range modes {
		widths[i] = max(8, len(m))
	}
	return widths
}

// resultModes lists the modes of a result in report order.
func resultModes(res *history.Result) []history.Mode {
	return history.ReportOrder(slices.Collect(maps.Keys(res.Modes)))
}

// counterexamplesHeading introduces the counterexamples shown of those kept.
func counterexamplesHeading(m history.Mode, shown, kept int) string {
	if shown == 1 {
		return fmt.Sprintf("%s: the first counterexample (1 of %d kept; --json has them all):", m, kept)
	}
	return fmt.Sprintf("%s: the first %d counterexamples (of %d kept; --json has them all):", m, shown, kept)
}

// moreCounterexamples says how many counterexamples of each kind a report
// left out, the kinds in name order: "12 more stale-write, 3 more
// fence-reuse"; "" for none.
func moreCounterexamples(more map[history.CounterexampleKind]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(more)) {
		parts = append(parts, fmt.Sprintf("%d more %s", more[k], k))
	}
	return strings.Join(parts, ", ")
}

// describeParties names a counterexample's holders and their lease
// generations, each called fence only where it is one (word: the mode's
// history.Contender.FenceWord).
func describeParties(c history.Counterexample, word string) string {
	s := fmt.Sprintf("%s (%s %d)", c.Holder, word, c.Fence)
	if c.Other != "" {
		s += fmt.Sprintf(" vs %s (%s %d)", c.Other, word, c.OtherFence)
	}
	return s
}

// writeFindings writes each contender's three findings (history.Findings),
// as the checker made them: the lock's own safety, the write path, and what
// the run exercised.
func writeFindings(w io.Writer, res *history.Result) {
	fmt.Fprintln(w, "Findings (lock: its own safety; writes: the write path; coverage: what ran):")
	for _, m := range resultModes(res) {
		rep := res.Modes[m]
		c := rep.Contender
		fmt.Fprintf(w, "%s (%s, %s):\n", m, strings.TrimSpace(c.Library+" "+c.Version), c.Discipline)
		f := rep.Findings
		for _, p := range []struct {
			name string
			f    history.Finding
		}{{"lock", f.Lock}, {"writes", f.Writes}, {"coverage", f.Coverage}} {
			reason := p.f.Reason
			if p.f.Counts != nil {
				reason += ". " + p.f.Counts.String()
			}
			prefix := fmt.Sprintf("  %-8s %-12s ", p.name, p.f.Verdict)
			body := wrap(strings.TrimSuffix(reason, ".")+".", 80-len(prefix))
			fmt.Fprintln(w, prefix+strings.ReplaceAll(body, "\n", "\n"+strings.Repeat(" ", len(prefix))))
		}
	}
}

// writeVerdict writes the verdict paragraphs, wrapped for a terminal.
func writeVerdict(w io.Writer, res *history.Result) {
	for _, p := range verdictParagraphs(res) {
		fmt.Fprintln(w, wrap(p, 80))
	}
}

// verdictParagraphs says whether the fenced mode kept its promises, and
// what the naive mode did on the same faults.
func verdictParagraphs(res *history.Result) []string {
	var ps []string
	f, fenced := res.Modes[history.Fenced]
	own := ownViolations(res)
	if len(own) > 0 && (!fenced || len(f.Violations) == 0) {
		ps = append(ps, "VERDICT: "+brokeWhat(own, "THE LIBRARY RETURNED AN ERROR IT NEVER SHOULD", "THE LOCK BROKE ITS INVARIANTS")+
			". This is a bug in the leasefence library: "+strings.Join(own, "; ")+".")
	} else if fenced {
		switch {
		case len(own) > 0:
			ps = append(ps, "VERDICT: THE FENCED MODE BROKE ITS INVARIANTS. This is a bug in the leasefence library: "+
				strings.Join(own, "; ")+".")
		case f.Vacuous:
			ps = append(ps, "VERDICT: VACUOUS. The fenced mode made no write at all, so nothing it promises was put to "+
				"the test: its zeros say nothing. Give the agents time to write (a shorter think, a longer run).")
		case len(f.NotExercised) > 0:
			ps = append(ps, "verdict: INCONCLUSIVE. The fenced mode broke nothing, but the run did not put all it promises to "+
				"the test, and what was not tested is not said to have held. Not exercised: "+strings.Join(f.NotExercised, "; ")+
				". Stalls past the TTL exercise them.")
		case res.DriftWithinBudget:
			ps = append(ps, "verdict: the fenced mode held its invariants: no stale write landed through a gate, "+
				"every refusal is explained by an overlap or a lost fence counter, and no holder believed past "+
				"the coordinator's expiry (drift is within the skew budget).")
		default:
			ps = append(ps, "verdict: the fenced mode held its invariants: no stale write landed through a gate, "+
				"and every refusal is explained by an overlap or a lost fence counter. "+
				fmt.Sprintf("Drift here exceeds the skew budget, so containment breaches (%d) are expected and are not a violation: ", f.ContainmentBreaches)+
				"the skew budget is an assumption, not a measurement.")
		}
	}
	if n, ok := res.Modes[history.Naive]; ok {
		ps = append(ps, fmt.Sprintf("The naive mode landed %s; %s silent.", history.Plural(n.StaleWritesLanded, "stale write", "stale writes"),
			history.Plural(n.SilentOverlaps, "of its overlaps was", "of its overlaps were")))
		if n.ReissuedWritesLanded > 0 {
			ps = append(ps, fmt.Sprintf("%s under fences reissued by a coordinator that lost its counter: "+
				"not stale, each was its resource's newest lease generation.", history.Plural(n.ReissuedWritesLanded, "write landed", "writes landed")))
		}
	}
	ps = append(ps, contenderParagraphs(res)...)
	return append(ps, forgeryParagraphs(res)...)
}

// ownViolations lists the violations of the lab's own contenders, fenced
// first: a bug in the leasefence library. A library contender's are its
// own (contenderParagraphs).
func ownViolations(res *history.Result) []string {
	own := &history.Result{Modes: make(map[history.Mode]*history.Report)}
	for m, rep := range res.Modes {
		if ownContender(rep) {
			own.Modes[m] = rep
		}
	}
	return own.Violations()
}

// ownContender reports whether rep is of one of the lab's own two
// contenders (a report that names none is).
func ownContender(rep *history.Report) bool {
	return rep.Contender.Library == "" || rep.Contender.Library == history.LabLibrary
}

// contenderParagraphs give the verdict of each contender that is not
// one of the lab's own, in report order: a fenced one held its
// invariants or broke them; a naive one's stale writes are findings about
// its discipline, not failures of the run; a lock of either that broke
// mutual exclusion broke its invariants.
func contenderParagraphs(res *history.Result) []string {
	var ps []string
	for _, m := range resultModes(res) {
		rep := res.Modes[m]
		if ownContender(rep) {
			continue
		}
		c := rep.Contender
		who := fmt.Sprintf("%s (%s, %s)", m, strings.TrimSpace(c.Library+" "+c.Version), c.Discipline)
		excl := fmt.Sprintf("%s: the lock granted a resource while an earlier lease on it still ran",
			history.Plural(rep.MutualExclusionViolations, "mutual-exclusion violation", "mutual-exclusion violations"))
		switch {
		case rep.MutualExclusionViolations == 0 && rep.Takeovers == 0:
			excl = "mutual exclusion not exercised: no resource was granted while an earlier lease on it was unreleased"
		case rep.MutualExclusionViolations == 0:
			excl = "no mutual-exclusion violation: the lock never granted a resource while an earlier lease on it still ran"
		}
		gens := generationsNote(c.Generations)
		switch {
		case len(rep.Violations) > 0 && c.Discipline == history.DisciplineFenced:
			ps = append(ps, fmt.Sprintf("VERDICT for %s: BROKE ITS INVARIANTS: %s.", who, strings.Join(rep.Violations, "; ")))
		case len(rep.Violations) > 0:
			ps = append(ps, fmt.Sprintf("VERDICT for %s: %s: %s.", who,
				brokeWhat(rep.Violations, "THE LIBRARY RETURNED AN ERROR IT NEVER SHOULD", "BROKE ITS INVARIANTS"), strings.Join(rep.Violations, "; ")))
		case rep.Vacuous:
			ps = append(ps, fmt.Sprintf("%s: vacuous: it made no write, so nothing was put to the test.", who))
		case c.Discipline == history.DisciplineFenced && len(rep.NotExercised) > 0:
			ps = append(ps, fmt.Sprintf("%s: INCONCLUSIVE: it broke nothing, but the run did not put all it promises to the test, "+
				"and what was not tested is not said to have held. Not exercised: %s%s.", who, strings.Join(rep.NotExercised, "; "), gens))
		case c.Discipline == history.DisciplineFenced:
			ps = append(ps, fmt.Sprintf("%s held its invariants: no stale write landed through a gate (%d refused); %s%s.", who, rep.CommitsRefused, excl, gens))
		default:
			ps = append(ps, fmt.Sprintf("%s landed %s (%s silent); %s%s.", who, history.Plural(rep.StaleWritesLanded, "stale write", "stale writes"),
				history.Plural(rep.SilentOverlaps, "overlap was", "overlaps were"), excl, gens))
		}
	}
	return ps
}

// brokeWhat heads a verdict on violations vs: errors when every one is an
// error the library returned, else broke (a lock that broke mutual
// exclusion broke its invariants, whatever its discipline).
func brokeWhat(vs []string, errors, broke string) string {
	for _, v := range vs {
		if !strings.HasPrefix(v, history.LibraryErrorViolation) {
			return broke
		}
	}
	return errors
}

// generationsNote says how a contender's lease generations were
// numbered, where it was not by a fence.
func generationsNote(how string) string {
	switch how {
	case "server":
		return " (generations in the server's own order)"
	case "observed":
		return " (generations in the order the lab saw the grants: the server shows none)"
	}
	return ""
}

// forgeryParagraphs says what the forgers got, mode by mode, if a
// scenario had any.
func forgeryParagraphs(res *history.Result) []string {
	var ps []string
	if f, ok := res.Modes[history.Fenced]; ok && f.ForgeriesRefused+f.ForgeriesLanded > 0 {
		ps = append(ps, fmt.Sprintf("Forgers: the fenced mode's resources refused %s (proofs the coordinator never signed, "+
			"or signed for another resource) and let %d land.", history.Plural(f.ForgeriesRefused, "forged write", "forged writes"), f.ForgeriesLanded))
	}
	if n, ok := res.Modes[history.Naive]; ok && n.ForgeriesRefused+n.ForgeriesLanded > 0 {
		ps = append(ps, fmt.Sprintf("The naive mode checks no proof: %s landed, %d of them above every fence landed before.",
			history.Plural(n.ForgeriesLanded, "forged write", "forged writes"), n.ForgedFloorsMoved))
	}
	return ps
}

// wrap breaks text into lines of at most width columns at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if col+1+len(word) > width {
				b.WriteByte('\n')
				col = 0
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

// realTimeNote qualifies howToRead's last sentence for a real-time run.
const realTimeNote = `In a real-time run the seed fixes the choices (stalls, drops, picks) but not
when things happen, so another run of the same seed differs; the digest
identifies this history, and lab check of its --events file gives it again.
`

// howToRead is the report's closing paragraph.
const howToRead = `How to read this: both modes run the same agents on the same faults; only the
write path differs. A naive agent checks "now < expiresAt" and writes; a fenced
agent writes through the resource's FenceGate with its lease's fence. An overlap
is two agents acting as holders of one resource at once (a stall or a lost
message makes it; no lease can prevent it). In naive mode an overlap whose
older write lands last is silent: a stale write, with no error anywhere. In
fenced mode that write is refused and logged, so "silent overlaps" and "stale
writes landed" must stay 0. "Commits refused" counts refused writes, "refused
overlaps" the pairs of holders whose overlap a refusal caught: one stalled
write can settle two overlaps, and a restart that lost the fence counter
causes refusals with no overlap; "unexplained refusals" must stay 0. A
containment breach is a holder believing in a lease after the coordinator let
it go. Each counterexample is dated when it began (an overlap: when the second
holder took the lease). The digest identifies the run: the same scenario and
seed give the same digest, event for event.
`

// jsonResult is the JSON report: history.Result's fields, and whether the
// run was cut short. The schema is documented in the package doc.
type jsonResult struct {
	*history.Result
	// Modes shadows the Result's: each report with its contender's verdict.
	Modes map[history.Mode]jsonMode `json:"modes"`
	Runner
	Verdict       string                 `json:"verdict"`
	Interrupted   bool                   `json:"interrupted,omitempty"`
	Interventions []history.Intervention `json:"interventions,omitempty"`
}

// The verdicts of the JSON report: the fenced mode (and the library in
// every mode) kept its promises, or broke one.
const (
	VerdictHeld    = "held"
	VerdictBroken  = "broken"
	VerdictVacuous = "vacuous" // nothing broke, and nothing was tested: the fenced mode made no write
	// VerdictInconclusive: nothing broke, but the run left a property
	// unexercised (history.Report.NotExercised), which is never held.
	VerdictInconclusive = "inconclusive"
)

// Verdict is VerdictBroken when res failed (the fenced mode broke an
// invariant, a lock broke mutual exclusion, or the library returned an
// error it never should), else VerdictVacuous when the run made no write
// to judge (history.Result.Vacuous), else VerdictInconclusive when a
// mode's verdict is, else VerdictHeld.
func Verdict(res *history.Result) string {
	switch {
	case res.Failed():
		return VerdictBroken
	case res.Vacuous():
		return VerdictVacuous
	}
	for _, rep := range res.Modes {
		if ModeVerdict(rep) == VerdictInconclusive {
			return VerdictInconclusive
		}
	}
	return VerdictHeld
}

// jsonMode is one contender's report in the JSON, with its verdict.
type jsonMode struct {
	*history.Report
	Verdict string `json:"verdict"`
}

// VerdictUnsafe is a naive contender's verdict when it landed a stale
// write: a finding about the discipline, not a failure of the run.
const VerdictUnsafe = "unsafe"

// ModeVerdict is one contender's verdict in one word, derived from its
// findings (history.Findings): VerdictBroken when its lock finding is
// broken, or its writes finding is, fenced or by a violation (a write
// landed under no lease); VerdictVacuous when it made
// no write; VerdictUnsafe when (naive) its writes finding is broken;
// VerdictInconclusive when its lock or writes finding is inconclusive or
// the run left a property of its discipline unexercised; else VerdictHeld.
// The coverage finding's list of contract paths not exercised is said
// there, and does not make the word inconclusive.
func ModeVerdict(rep *history.Report) string {
	f := rep.Findings
	fenced := rep.Fenced()
	switch {
	case f.Lock.Verdict == history.FindingBroken || (f.Writes.Verdict == history.FindingBroken && (fenced || len(rep.Violations) > 0)):
		return VerdictBroken
	case rep.Vacuous:
		return VerdictVacuous
	case f.Writes.Verdict == history.FindingBroken:
		return VerdictUnsafe
	case f.Lock.Verdict == history.FindingInconclusive || f.Writes.Verdict == history.FindingInconclusive || len(rep.NotExercised) > 0:
		return VerdictInconclusive
	}
	return VerdictHeld
}

// JSON writes the report as indented JSON.
func JSON(w io.Writer, res *history.Result, stop Stop, run Runner) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	modes := make(map[history.Mode]jsonMode, len(res.Modes))
	for m, rep := range res.Modes {
		modes[m] = jsonMode{Report: rep, Verdict: ModeVerdict(rep)}
	}
	return enc.Encode(jsonResult{Result: res, Modes: modes, Runner: run, Verdict: Verdict(res), Interrupted: stop.Interrupted, Interventions: stop.Interventions})
}
