package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
)

const swarmAbout = `Runs a scenario over many seeds, both modes each, on all cores. Each seed draws
its own fault knobs (drops, duplicates, delays, drift and whether the skew budget
covers it, long stalls, coordinator restarts, the gate push) from the seed, so
thousands of seeds explore thousands of fault mixes. A knob flag of a drawn knob
fixes it for every seed (--drop-replies 1: every seed loses every reply), and the
others are still drawn, each seed drawing them as it would have; any other knob
flag changes the base scenario. The summary says which knobs were fixed and which
drawn. It runs 100 seeds unless --seeds says otherwise; --seed is refused: the
seeds are --first-seed and the ones after it.

It prints each seed whose fenced mode broke an invariant with the one command
that reproduces it, then a summary: seeds run, fenced failures, naive stale
writes, fenced refusals, events per second.

Exit status: 0 when no seed broke the fenced mode, 1 when one did (a bug in the
library), 2 for bad input, 130 when interrupted.`

// defaultSwarmSeeds is how many seeds a swarm runs unless told: enough to
// draw a fault mix that breaks a naive run, a few seconds on a laptop.
const defaultSwarmSeeds = 100

// swarm is `lab swarm`.
func (a *app) swarm(ctx context.Context, args []string) int {
	fs := a.newFlagSet("swarm", "[scenario|file] [--seeds N] [flags]", swarmAbout)
	var sf scenarioFlags
	sf.register(fs)
	seeds := fs.Int("seeds", defaultSwarmSeeds, "how many seeds to run")
	first := fs.Uint64("first-seed", 1, "the first seed; seeds run first-seed, first-seed+1, ...")
	jobs := fs.Int("jobs", 0, "runs at once; 0 means one per core")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if len(pos) > 1 {
		return a.badInput("swarm", &argumentsError{takesOne: true, got: pos})
	}
	var arg string
	if len(pos) == 1 {
		arg = pos[0]
	}
	if *seeds < 1 {
		return a.badInput("swarm", fmt.Errorf("--seeds: must be >= 1, got %d", *seeds))
	}
	if *jobs < 0 {
		return a.badInput("swarm", fmt.Errorf("--jobs: must be >= 0, got %d", *jobs))
	}
	if *first > ^uint64(0)-uint64(*seeds-1) {
		return a.badInput("swarm", fmt.Errorf("--first-seed: %d + %d seeds overflows", *first, *seeds))
	}
	if slices.ContainsFunc(sf.given, func(g givenFlag) bool { return g.name == "seed" }) {
		return a.badInput("swarm", errors.New("--seed: a swarm runs seeds --first-seed, --first-seed+1, ...; give --first-seed"))
	}
	base, source, _, err := loadScenario(arg)
	if err != nil {
		return a.badInput("swarm", err)
	}
	if err := sf.apply(&base, source); err != nil {
		return a.badInput("swarm", err)
	}

	prog := a.newProgress("swarm " + base.Name)
	start := time.Now()
	ranges := sf.swarmRanges()
	res, err := harness.Swarm(ctx, base, harness.SwarmOptions{Seeds: *seeds, FirstSeed: *first, Jobs: *jobs, Ranges: &ranges,
		Progress: func(done, total int) {
			prog.show(float64(done)/float64(total), fmt.Sprintf("%d/%d seeds, %s", done, total, history.FormatDuration(time.Since(start))))
		}})
	prog.clear()
	interrupted := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if err != nil && !interrupted {
		return a.badInput("swarm", err)
	}
	repro := func(seed uint64) string {
		line := []string{"lab", "run"}
		if arg != "" {
			line = append(line, arg)
		}
		line = append(line, sf.args()...)
		return commandLine(append(line, "--seed="+strconv.FormatUint(seed, 10), "--swarm")...)
	}
	if *asJSON {
		a.writeSwarmJSON(res, repro, sf.swarmArgs(), ranges.Drawn(), interrupted)
	} else {
		writeSwarmReport(a.stdout, base.Name, *first, *seeds, res, repro, interrupted, sf.swarmArgs(), ranges.Drawn())
	}
	switch {
	case len(res.Failures) > 0:
		fmt.Fprintf(a.stderr, "\n!! BUG IN LEASEFENCE: the fenced mode broke an invariant on %s. Each line above\n!! starting with FAIL names a seed and the command that reproduces it.\n",
			ofSeeds(len(res.Failures), res.Seeds))
		return exitFailed
	case interrupted:
		fmt.Fprintf(a.stderr, "lab swarm: interrupted after %s; the summary covers those.\n", ofSeeds(res.Seeds, *seeds))
		return exitInterrupted
	}
	return exitOK
}

// writeSwarmJSON prints the swarm's summary as JSON.
func (a *app) writeSwarmJSON(res *harness.SwarmResult, repro func(uint64) string, fixed []string, drawn []harness.SwarmKnob, interrupted bool) {
	type failure struct {
		harness.SwarmFailure
		Reproduce string `json:"reproduce"`
	}
	out := struct {
		*harness.SwarmResult
		Failures        []failure           `json:"failures"`
		Fixed           []string            `json:"fixed"` // the knob flags that fixed a drawn knob
		Drawn           []harness.SwarmKnob `json:"drawn"`
		EventsPerSecond float64             `json:"events_per_second"`
		Interrupted     bool                `json:"interrupted,omitempty"`
	}{SwarmResult: res, Failures: []failure{}, Fixed: append([]string{}, fixed...), Drawn: append([]harness.SwarmKnob{}, drawn...),
		EventsPerSecond: res.EventsPerSecond(), Interrupted: interrupted}
	for _, f := range res.Failures {
		out.Failures = append(out.Failures, failure{SwarmFailure: f, Reproduce: repro(f.Seed)})
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(a.stderr, "lab swarm: %v\n", err)
	}
}

// writeSwarmKnobs says which fault knobs every seed kept as the flags set
// them and which each seed drew.
func writeSwarmKnobs(w io.Writer, fixed []string, drawn []harness.SwarmKnob) {
	if len(fixed) > 0 {
		fmt.Fprintf(w, "  fixed for every seed %s\n", strings.Join(fixed, " "))
	}
	names := make([]string, len(drawn))
	for i, k := range drawn {
		names[i] = string(k)
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	fmt.Fprintf(w, "  drawn per seed       %s\n", strings.Join(names, ", "))
}

func writeSwarmReport(w io.Writer, name string, first uint64, seeds int, res *harness.SwarmResult,
	repro func(uint64) string, interrupted bool, fixed []string, drawn []harness.SwarmKnob) {
	for _, f := range res.Failures {
		fmt.Fprintf(w, "FAIL seed %d: %s\n", f.Seed, strings.Join(f.Violations, "; "))
		fmt.Fprintf(w, "  reproduce: %s\n", repro(f.Seed))
	}
	if len(res.Failures) > 0 {
		fmt.Fprintln(w)
	}
	last := first + uint64(seeds) - 1
	fmt.Fprintf(w, "swarm %s: seeds %d-%d", name, first, last)
	if interrupted {
		fmt.Fprintf(w, " (INTERRUPTED: %d of %d ran)", res.Seeds, seeds)
	}
	fmt.Fprintln(w)
	writeSwarmKnobs(w, fixed, drawn)
	fmt.Fprintf(w, "  seeds run            %d\n", res.Seeds)
	fmt.Fprintf(w, "  fenced failures      %d\n", len(res.Failures))
	fmt.Fprintf(w, "  naive stale writes   %d (in %s)\n", res.NaiveStaleWrites, ofSeeds(res.NaiveSeedsStale, res.Seeds))
	fmt.Fprintf(w, "  fenced refusals      %d\n", res.FencedRefusals)
	fmt.Fprintf(w, "  events               %d in %s (%.0f events/s)\n", res.Events, history.FormatDuration(res.Elapsed), res.EventsPerSecond())
}
