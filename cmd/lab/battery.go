package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/spec"
)

// batteryName is the scenario argument of lab run that runs the battery.
const batteryName = "battery"

const batteryAbout = `Runs the default battery (the one labtest.Check runs): scenarios chosen so
that together they exercise every path a lock has (contention, expiry under a
paused holder, renewal after expiry, late and duplicated releases, lost replies
and retried acquires), each drawing its faults from its seed, on the same
contenders. A scenario a contender cannot play (a coordinator restart, for a
library's lock) is left out of its battery, with a note.

It prints each scenario's report, then the three findings of each contender
summed over the battery: lock (mutual exclusion and the lease contract),
writes (stale writes under its discipline) and coverage, with the counts. A
line per scenario with its findings and counts goes to stderr as it ends.
--json prints one document: the scenarios' reports (each with its modes) and
the findings summed per contender. --stop-at-first ends a run at the first
counterexample of a lock's own safety, and the battery with it.

Exit status: 1 when a contender's lock finding is broken over the battery or
a fenced contender's writes are; 0 otherwise (inconclusive is said on the
verdict line); 2 for bad input; 130 when interrupted.`

// batteryRun is one scenario of the battery as it ran: its modes' result,
// and the report's header and runner.
type batteryRun struct {
	sc     spec.Scenario
	modes  []history.Mode
	res    *history.Result
	header history.Header
	info   report.Runner
	stop   report.Stop // a run --stop-at-first ended at a counterexample
}

// batteryPlan is what the battery runs: each scenario with the modes that
// play it, and what was left out, for whom and why.
type batteryPlan struct {
	scenarios []spec.BatteryScenario
	modes     [][]history.Mode // by scenario
	leftOut   []batteryNote
	all       []history.Mode
	real      *backendFlags // nil: the simulator
}

// batteryNote is a scenario left out of a contender's battery, and why.
type batteryNote struct {
	Scenario  string       `json:"scenario"`
	Contender history.Mode `json:"contender,omitempty"` // "" for every contender
	Why       string       `json:"why"`
}

// runBattery is `lab run battery`.
func (a *app) runBattery(ctx context.Context, args []string) int {
	fs := a.newFlagSet("run battery", "[flags]", batteryAbout)
	var rf runFlags
	rf.register(fs, "print the JSON document instead of the text reports")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if len(pos) > 0 {
		return a.badInput("run battery", &argumentsError{got: pos})
	}
	plan, err := planBattery(&rf.modes, &rf.backend)
	if err != nil {
		return a.badInput("run battery", err)
	}
	var runs []*batteryRun
	interrupted := false
	for i, b := range plan.scenarios {
		if len(plan.modes[i]) == 0 {
			continue
		}
		run, err := a.batteryScenario(ctx, plan, b.Scenario, plan.modes[i], rf.stopAtFirst)
		if err != nil && ctx.Err() != nil {
			interrupted = true
			break
		}
		if err != nil {
			return a.badInput("run battery", fmt.Errorf("%s: %w", b.Name, err))
		}
		runs = append(runs, run)
		fmt.Fprintf(a.stderr, "lab run battery %d/%d %s: %s\n", i+1, len(plan.scenarios), b.Name, batteryLine(run))
		if rf.stopAtFirst && lockBroken(run.res) {
			fmt.Fprintf(a.stderr, "lab run battery: stopped at %s, the first scenario where a lock broke (--stop-at-first)\n", b.Name)
			break
		}
	}
	for _, n := range plan.leftOut {
		fmt.Fprintf(a.stderr, "lab run battery: %s\n", n)
	}
	findings := batteryFindings(plan.all, runs)
	if rf.json {
		if err := writeBatteryJSON(a.stdout, runs, plan.leftOut, plan.all, findings); err != nil {
			fmt.Fprintf(a.stderr, "lab run battery: %v\n", err)
		}
	} else {
		for _, r := range runs {
			report.Text(a.stdout, &r.header, r.res, r.stop, r.info)
			fmt.Fprintln(a.stdout)
		}
		writeBatteryText(a.stdout, runs, plan.all, findings)
	}
	if interrupted {
		fmt.Fprintln(a.stderr, "lab run battery: interrupted; the reports cover the scenarios that ran.")
		return exitInterrupted
	}
	if batteryBroken(findings, runs) {
		return exitFailed
	}
	return exitOK
}

func (n batteryNote) String() string {
	who := "every contender"
	if n.Contender != "" {
		who = string(n.Contender)
	}
	return fmt.Sprintf("%s left out for %s: %s", n.Scenario, who, n.Why)
}

// planBattery checks the flags against the battery before anything runs:
// the contenders (against its first scenario, which every contender
// plays) and the backend are bad input; a later scenario a contender or
// the backend cannot play is left out, with a note.
func planBattery(mf *modeFlags, bf *backendFlags) (*batteryPlan, error) {
	scenarios := spec.Battery()
	first := scenarios[0].Scenario
	rc, backend, all, err := configModes(bf, mf, nil, first)
	if err != nil {
		return nil, err
	}
	if rc != nil && bf.processes() {
		return nil, fmt.Errorf("%s: the battery runs its agents in-process", bf.agentsAs())
	}
	plan := &batteryPlan{scenarios: scenarios, all: all}
	if rc != nil {
		plan.real = bf
	}
	for _, b := range scenarios {
		var modes []history.Mode
		if _, err := bf.config(b.Scenario); err != nil {
			plan.leftOut = append(plan.leftOut, batteryNote{Scenario: b.Name, Why: err.Error()})
		} else {
			for _, m := range all {
				if err := registry.CheckContenders([]history.Mode{m}, backend, b.Scenario); err != nil {
					plan.leftOut = append(plan.leftOut, batteryNote{Scenario: b.Name, Contender: m, Why: err.Error()})
					continue
				}
				modes = append(modes, m)
			}
		}
		plan.modes = append(plan.modes, modes)
	}
	return plan, nil
}

// batteryScenario runs sc with modes on the simulator, or in real time on
// the backend the flags say, stopped at the first counterexample of a
// lock's own safety when stopAtFirst.
func (a *app) batteryScenario(ctx context.Context, plan *batteryPlan, sc spec.Scenario, modes []history.Mode, stopAtFirst bool) (*batteryRun, error) {
	run := &batteryRun{sc: sc, modes: modes}
	if plan.real == nil {
		run.header, run.info = registry.Header(sc, modes), report.Runner{Backend: backendSim}
		res, err := harness.Run(ctx, sc, harness.RunOptions{Modes: modes})
		run.res = res
		return run, err
	}
	rc, err := plan.real.config(sc)
	if err != nil {
		return nil, err
	}
	rr := &realRun{config: *rc, agents: plan.real.agents, onSetup: a.onSetup, stopAtFirst: stopAtFirst}
	if err := rr.open(ctx, sc, modes, nil); err != nil {
		return nil, err
	}
	defer rr.close(a.stderr, cmp.Or(a.closeLimit, closeAfterStuck))
	res, err := rr.run(ctx)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case rr.neverReturned:
		// A call never returned: the record up to then is judged, the
		// call a library error.
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if m, stopped := rr.stopped(); stopped {
		run.stop = stoppedAtFirst(m, res.Wall)
	}
	run.res, run.header = res.Result, rr.header()
	run.info = report.Runner{Backend: run.header.Backend, Real: rr.figures(res)}
	return run, nil
}

// batteryLine is a scenario's line of progress: each mode's findings and
// coverage counts.
func batteryLine(r *batteryRun) string {
	var parts []string
	for _, m := range r.modes {
		rep := r.res.Modes[m]
		if rep == nil {
			continue
		}
		f := rep.Findings
		s := fmt.Sprintf("%s: lock %s, writes %s (%d stale)", m, f.Lock.Verdict, f.Writes.Verdict, rep.StaleWritesLanded)
		if n := f.Coverage.Counts; n != nil {
			s += fmt.Sprintf(", takeovers %d, renewals after expiry %d, late releases %d, lost replies retried %d",
				n.Takeovers, n.RenewalsAfterExpiry, n.LateReleases, n.LostRepliesRetried)
		}
		parts = append(parts, s)
	}
	if r.stop.Interrupted {
		parts = append(parts, "stopped at the first counterexample")
	}
	return strings.Join(parts, "; ")
}

// lockBroken reports whether a mode's lock finding in res is broken.
func lockBroken(res *history.Result) bool {
	for _, rep := range res.Modes {
		if rep.Findings.Lock.Verdict == history.FindingBroken {
			return true
		}
	}
	return false
}

// batteryFindings are each contender's findings summed over the
// scenarios it ran.
func batteryFindings(modes []history.Mode, runs []*batteryRun) map[history.Mode]history.Findings {
	out := make(map[history.Mode]history.Findings, len(modes))
	for _, m := range modes {
		var br []history.BatteryRun
		for _, r := range runs {
			if rep := r.res.Modes[m]; rep != nil {
				br = append(br, history.BatteryRun{Scenario: r.sc.Name, Report: rep})
			}
		}
		out[m] = history.BatteryFindings(br)
	}
	return out
}

// batteryBroken: a contender's lock is broken over the battery, or a
// fenced contender's writes are.
func batteryBroken(findings map[history.Mode]history.Findings, runs []*batteryRun) bool {
	for m, f := range findings {
		if f.Lock.Verdict == history.FindingBroken {
			return true
		}
		if f.Writes.Verdict == history.FindingBroken && fencedIn(m, runs) {
			return true
		}
	}
	return false
}

// fencedIn reports whether contender m writes fenced, as the runs' headers
// say.
func fencedIn(m history.Mode, runs []*batteryRun) bool {
	for _, r := range runs {
		if _, ok := r.res.Modes[m]; ok {
			return r.header.Fenced(m)
		}
	}
	return false
}

// batteryVerdict is contender m's verdict line over the battery.
func batteryVerdict(m history.Mode, f history.Findings, fenced bool) string {
	switch {
	case f.Lock.Verdict == history.FindingBroken:
		return "BROKEN: the lock broke its own safety"
	case f.Writes.Verdict == history.FindingBroken && fenced:
		return "BROKEN: stale writes landed through the gate"
	case f.Lock.Verdict == history.FindingInconclusive:
		return "inconclusive: " + f.Lock.Reason
	case f.Writes.Verdict == history.FindingBroken:
		return "the lock held; its writes without a fence landed stale writes (the expected finding of a naive discipline)"
	case f.Writes.Verdict == history.FindingInconclusive:
		return "the lock held; the writes are inconclusive: " + f.Writes.Reason
	}
	return "held"
}

// writeBatteryText writes each contender's findings summed over the
// battery, and its verdict line.
func writeBatteryText(w io.Writer, runs []*batteryRun, modes []history.Mode, findings map[history.Mode]history.Findings) {
	fmt.Fprintf(w, "Battery: %s, findings summed per contender\n", batteryScenarioNames(runs))
	for _, m := range modes {
		f := findings[m]
		fmt.Fprintf(w, "  %s\n    lock:     %s: %s\n    writes:   %s: %s\n    coverage: %s: %s",
			m, f.Lock.Verdict, f.Lock.Reason, f.Writes.Verdict, f.Writes.Reason, f.Coverage.Verdict, f.Coverage.Reason)
		if n := f.Coverage.Counts; n != nil {
			fmt.Fprintf(w, ". %s", n)
		}
		fmt.Fprintf(w, "\n    verdict:  %s\n", batteryVerdict(m, f, fencedIn(m, runs)))
	}
}

func batteryScenarioNames(runs []*batteryRun) string {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.sc.Name
	}
	return strings.Join(names, ", ")
}

// batteryJSON is lab run battery --json: each scenario's report as lab
// run --json prints it (its modes), the scenarios left out, and each
// contender's findings summed over the battery with its verdict.
type batteryJSON struct {
	Battery    []json.RawMessage                 `json:"battery"`
	LeftOut    []batteryNote                     `json:"left_out,omitempty"`
	Contenders map[history.Mode]batteryContender `json:"contenders"`
}

type batteryContender struct {
	Findings history.Findings `json:"findings"`
	Verdict  string           `json:"verdict"`
}

func writeBatteryJSON(w io.Writer, runs []*batteryRun, leftOut []batteryNote, modes []history.Mode, findings map[history.Mode]history.Findings) error {
	doc := batteryJSON{Battery: []json.RawMessage{}, LeftOut: leftOut, Contenders: make(map[history.Mode]batteryContender)}
	for _, r := range runs {
		var b bytes.Buffer
		if err := report.JSON(&b, r.res, r.stop, r.info); err != nil {
			return err
		}
		doc.Battery = append(doc.Battery, json.RawMessage(bytes.TrimSpace(b.Bytes())))
	}
	for _, m := range modes {
		doc.Contenders[m] = batteryContender{Findings: findings[m], Verdict: batteryVerdict(m, findings[m], fencedIn(m, runs))}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
