package main

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/leasefence/lab/fixtures"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/report"
)

// fixturesJSON is `lab fixtures --json`: the verdict of every fixture
// file and of them all, for machines. The schema is in the package doc.
type fixturesJSON struct {
	// Verdict is "broken" when a run of any fixture broke the fenced
	// mode's invariants (a bug in the library), else "held"; whether
	// every fixture's expectations were met is Passed.
	Verdict  string            `json:"verdict"`
	Passed   int               `json:"passed"`
	Failed   int               `json:"failed"`
	Skipped  int               `json:"skipped,omitempty"`
	Fixtures []fixtureJSONLine `json:"fixtures"`
}

type fixtureJSONLine struct {
	Name      string   `json:"name"`
	File      string   `json:"file"`
	Verdict   string   `json:"verdict,omitempty"` // "" when it did not run
	Passed    bool     `json:"passed"`
	Failures  []string `json:"failures,omitempty"`
	Reproduce string   `json:"reproduce,omitempty"` // the command that reproduces the first failing seed
	Error     string   `json:"error,omitempty"`     // why it did not load, run to its end, or run here
}

// writeFixturesJSON writes runs as fixturesJSON.
func writeFixturesJSON(w io.Writer, runs []*fixtureRun) error {
	out := fixturesJSON{Verdict: report.VerdictHeld, Fixtures: []fixtureJSONLine{}}
	for _, r := range runs {
		line := fixtureJSONLine{Name: r.name(), File: r.file, Passed: r.passed()}
		switch {
		case r.skipped != nil:
			out.Skipped++
			line.Error = r.skipped.Error()
		case r.loadErr != nil:
			line.Error = r.loadErr.Error()
		case r.outcome != nil:
			line.Verdict = outcomeVerdict(r.outcome)
			if r.outcome.Err != nil {
				line.Error = r.outcome.Err.Error()
			}
			for _, f := range r.outcome.Failures() {
				line.Failures = append(line.Failures, f.String())
			}
			line.Reproduce = r.reproduce()
		}
		if line.Verdict == report.VerdictBroken {
			out.Verdict = report.VerdictBroken
		}
		switch {
		case r.skipped != nil:
		case line.Passed:
			out.Passed++
		default:
			out.Failed++
		}
		out.Fixtures = append(out.Fixtures, line)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// outcomeVerdict is "broken" when any seed's run broke the fenced mode.
func outcomeVerdict(o *fixtures.Outcome) string {
	for _, s := range o.Seeds {
		if s.Result != nil && report.Verdict(s.Result) == report.VerdictBroken {
			return report.VerdictBroken
		}
	}
	return report.VerdictHeld
}

// reproduce is the command that reproduces the fixture's first failing
// seed, or "" when none failed.
func (r *fixtureRun) reproduce() string {
	if r.outcome == nil {
		return ""
	}
	failures := r.outcome.Failures()
	if len(failures) == 0 {
		return ""
	}
	repro := []string{"lab", "run", r.file, "--seed", strconv.FormatUint(failures[0].Seed, 10)}
	if b := r.fixture.Backend; b != registry.Sim {
		repro = append(repro, "--backend", b)
	}
	return commandLine(repro...)
}
