package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
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
writes, fenced refusals, events and seeds per second, and each mode's first
counterexample (the lowest seed that showed one: for fenced a broken invariant,
for naive a stale write), with the seeds and wall time it took to reach it and
the lab run line that reproduces it.

--shard I/N runs slice I (from 0) of N of the seeds, interleaved (positions I,
I+N, ...), so that N machines split one swarm; --merge FILE... combines the
shards' --json outputs into the summary the unsharded swarm prints, seed for
seed (its wall time the longest shard's). See docs/swarm.md for a Kubernetes
Indexed Job and a CI matrix.

Exit status: 0 when no seed broke the fenced mode, 1 when one did (a bug in the
library), 2 for bad input, 130 when interrupted.`

// defaultSwarmSeeds is how many seeds a swarm runs unless told: enough to
// draw a fault mix that breaks a naive run, a few seconds on a laptop.
const defaultSwarmSeeds = 100

// swarm is `lab swarm`.
func (a *app) swarm(ctx context.Context, args []string) int {
	fs := a.newFlagSet("swarm", "[scenario|file] [--seeds N] [--shard I/N] [flags] | --merge FILE...", swarmAbout)
	var sf scenarioFlags
	sf.register(fs)
	seeds := fs.Int("seeds", defaultSwarmSeeds, "how many seeds to run (all shards together, with --shard)")
	first := fs.Uint64("first-seed", 1, "the first seed; seeds run first-seed, first-seed+1, ...")
	jobs := fs.Int("jobs", 0, "runs at once; 0 means one per core")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	var shard harness.SwarmShard
	fs.Func("shard", "run only slice `I/N` of the seeds, I counting from 0 (e.g. $JOB_COMPLETION_INDEX/4)", func(s string) error {
		var err error
		shard, err = parseShard(s)
		return err
	})
	var mf modeFlags
	mf.register(fs, "run each seed")
	merge := fs.Bool("merge", false, "combine the --json outputs of every shard, the files given, into one summary")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if *merge {
		return a.swarmMerge(fs, pos, *asJSON)
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
	if shard.Count > *seeds {
		return a.badInput("swarm", fmt.Errorf("--shard: %d shards of %s leave some empty", shard.Count, history.Plural(*seeds, "seed", "seeds")))
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
	var modes []history.Mode // nil: the default, naive and fenced
	if mf.modeGiven || mf.contendersGiven {
		if modes, err = mf.modes(nil, registry.Sim, base); err != nil {
			return a.badInput("swarm", err)
		}
	} else if err := registry.CheckContenders(registry.Modes(), registry.Sim, base); err != nil {
		return a.badInput("swarm", err)
	}

	label := "swarm " + base.Name
	if shard.Count > 0 {
		label += fmt.Sprintf(" shard %d/%d", shard.Index, shard.Count)
	}
	prog := a.newProgress(label)
	start := time.Now()
	ranges := sf.swarmRanges()
	repro := func(seed uint64) string {
		line := []string{"lab", "run"}
		if arg != "" {
			line = append(line, arg)
		}
		line = append(line, sf.args()...)
		line = append(line, mf.args()...)
		return commandLine(append(line, "--seed="+strconv.FormatUint(seed, 10), "--swarm")...)
	}
	res, err := harness.Swarm(ctx, base, harness.SwarmOptions{Seeds: *seeds, FirstSeed: *first, Shard: shard, Jobs: *jobs, Ranges: &ranges,
		Modes: modes, Reproduce: repro,
		Progress: func(done, total int) {
			wall := time.Since(start)
			prog.show(float64(done)/float64(total), fmt.Sprintf("%d/%d seeds, %s, %.1f seeds/s", done, total, history.FormatDuration(wall), float64(done)/wall.Seconds()))
		}})
	prog.clear()
	interrupted := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if err != nil && !interrupted {
		return a.badInput("swarm", err)
	}
	return a.swarmVerdict(&swarmSummary{SwarmResult: res, Fixed: sf.swarmArgs(), Drawn: ranges.Drawn(), Interrupted: interrupted}, *asJSON)
}

// parseShard reads --shard's I/N.
func parseShard(s string) (harness.SwarmShard, error) {
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return harness.SwarmShard{}, errors.New("must be I/N, e.g. 0/4")
	}
	if count < 1 || index < 0 || index >= count {
		return harness.SwarmShard{}, errors.New("the index counts from 0 to N-1 (as JOB_COMPLETION_INDEX does), N from 1")
	}
	return harness.SwarmShard{Index: index, Count: count}, nil
}

// swarmSummary is what lab swarm prints, and what --json prints of it:
// harness.SwarmResult and the figures derived from it. A shard's --json
// is this too, and --merge reads it back.
type swarmSummary struct {
	*harness.SwarmResult
	Fixed           []string            `json:"fixed"` // the knob flags that fixed a drawn knob
	Drawn           []harness.SwarmKnob `json:"drawn"`
	EventsPerSecond float64             `json:"events_per_second"`
	SeedsPerSecond  float64             `json:"seeds_per_second"`
	Interrupted     bool                `json:"interrupted,omitempty"`
}

// swarmVerdict prints a swarm's summary (as JSON with asJSON) and returns
// its exit status.
func (a *app) swarmVerdict(sum *swarmSummary, asJSON bool) int {
	res := sum.SwarmResult
	if asJSON {
		a.writeSwarmJSON(sum)
	} else {
		writeSwarmReport(a.stdout, sum)
	}
	switch {
	case len(res.Failures) > 0:
		fmt.Fprintf(a.stderr, "\n!! BUG IN LEASEFENCE: the fenced mode broke an invariant on %s. Each line above\n!! starting with FAIL names a seed and the command that reproduces it.\n",
			ofSeeds(len(res.Failures), res.Seeds))
		return exitFailed
	case sum.Interrupted:
		fmt.Fprintf(a.stderr, "lab swarm: interrupted after %s; the summary covers those.\n", ofSeeds(res.Seeds, sum.Share()))
		return exitInterrupted
	}
	return exitOK
}

// writeSwarmJSON prints the swarm's summary as JSON.
func (a *app) writeSwarmJSON(sum *swarmSummary) {
	out := *sum
	res := *sum.SwarmResult
	res.Failures = append([]harness.SwarmFailure{}, res.Failures...)
	out.SwarmResult = &res
	out.Fixed = append([]string{}, sum.Fixed...)
	out.Drawn = append([]harness.SwarmKnob{}, sum.Drawn...)
	out.EventsPerSecond, out.SeedsPerSecond = res.EventsPerSecond(), res.SeedsPerSecond()
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(a.stderr, "lab swarm: %v\n", err)
	}
}

// swarmMerge is `lab swarm --merge FILE...`: the shards' --json outputs
// combined into the summary of the whole swarm.
func (a *app) swarmMerge(fs *flag.FlagSet, files []string, asJSON bool) int {
	var others []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "merge" && f.Name != "json" {
			others = append(others, "--"+f.Name)
		}
	})
	if len(others) > 0 {
		return a.badInput("swarm", fmt.Errorf("--merge takes the shards' files and --json only, not %s: the shards ran with those", strings.Join(others, ", ")))
	}
	if len(files) == 0 {
		return a.badInput("swarm", errors.New("--merge: give the --json output of every shard, e.g. lab swarm --merge shard-*.json"))
	}
	parts := make([]*harness.SwarmResult, len(files))
	var first *swarmSummary
	for i, name := range files {
		sum, err := readSwarmSummary(name)
		if err != nil {
			return a.badInput("swarm", err)
		}
		if first == nil {
			first = sum
		} else if !slices.Equal(sum.Fixed, first.Fixed) || !slices.Equal(sum.Drawn, first.Drawn) {
			return a.badInput("swarm", fmt.Errorf("--merge: %s fixed %v and drew %v, but %s fixed %v and drew %v", name, sum.Fixed, sum.Drawn, files[0], first.Fixed, first.Drawn))
		}
		if sum.Seeds < sum.Share() && !sum.Interrupted {
			// The count is the fact: a shard that ran short without
			// saying why is a file cut or edited, not a shard's output.
			return a.badInput("swarm", fmt.Errorf("--merge: %s (shard %d/%d) ran %s but does not say it was interrupted: run that shard again",
				name, sum.Shard.Index, sum.Shard.Count, ofSeeds(sum.Seeds, sum.Share())))
		}
		parts[i] = sum.SwarmResult
	}
	res, err := harness.MergeSwarms(parts)
	if err != nil {
		return a.badInput("swarm", fmt.Errorf("--merge: %w", err))
	}
	// The merged swarm is interrupted exactly when it ran fewer seeds
	// than it has: the shards' flags agree with their counts (checked
	// above), and the count is what the summary reports.
	return a.swarmVerdict(&swarmSummary{SwarmResult: res, Fixed: first.Fixed, Drawn: first.Drawn, Interrupted: res.Seeds < res.Share()}, asJSON)
}

// readSwarmSummary reads one shard's lab swarm --json output.
func readSwarmSummary(name string) (*swarmSummary, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--merge: %w", err)
	}
	sum := &swarmSummary{SwarmResult: &harness.SwarmResult{}}
	if err := json.Unmarshal(b, sum); err != nil {
		return nil, fmt.Errorf("--merge: %s is not the output of lab swarm --json: %w", name, err)
	}
	if sum.Shard == nil {
		return nil, fmt.Errorf("--merge: %s is the output of a whole swarm, not of a shard (lab swarm --shard I/N --json)", name)
	}
	return sum, nil
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

func writeSwarmReport(w io.Writer, sum *swarmSummary) {
	res := sum.SwarmResult
	for _, f := range res.Failures {
		fmt.Fprintf(w, "FAIL seed %d: %s\n", f.Seed, strings.Join(f.Violations, "; "))
		fmt.Fprintf(w, "  reproduce: %s\n", f.Reproduce)
	}
	if len(res.Failures) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "swarm %s: seeds %d-%d", res.Scenario, res.FirstSeed, res.LastSeed)
	if sh := res.Shard; sh != nil {
		fmt.Fprintf(w, ", shard %d/%d", sh.Index, sh.Count)
	}
	if sum.Interrupted {
		fmt.Fprintf(w, " (INTERRUPTED: %d of %d ran)", res.Seeds, sum.Share())
	}
	fmt.Fprintln(w)
	writeSwarmKnobs(w, sum.Fixed, sum.Drawn)
	fmt.Fprintf(w, "  seeds run            %d\n", res.Seeds)
	fmt.Fprintf(w, "  fenced failures      %d\n", len(res.Failures))
	fmt.Fprintf(w, "  naive stale writes   %d (in %s)\n", res.NaiveStaleWrites, ofSeeds(res.NaiveSeedsStale, res.Seeds))
	fmt.Fprintf(w, "  fenced refusals      %d\n", res.FencedRefusals)
	fmt.Fprintf(w, "  events               %d in %s (%.0f events/s)\n", res.Events, history.FormatDuration(res.Elapsed), res.EventsPerSecond())
	fmt.Fprintf(w, "  seeds per second     %.1f\n", res.SeedsPerSecond())
	writeFirstCounterexamples(w, res)
}

// writeFirstCounterexamples writes each mode's time to first
// counterexample, the modes in the order reports show them.
func writeFirstCounterexamples(w io.Writer, res *harness.SwarmResult) {
	modes := slices.Sorted(maps.Keys(res.FirstCounterexample))
	slices.SortStableFunc(modes, func(a, b history.Mode) int {
		return cmp.Compare(modeRank(a), modeRank(b))
	})
	if len(modes) == 0 {
		return
	}
	fmt.Fprintln(w, "  first counterexample")
	for _, m := range modes {
		f := res.FirstCounterexample[m]
		if f == nil {
			fmt.Fprintf(w, "    %-18s none in %s\n", m, history.Plural(res.Seeds, "seed", "seeds"))
			continue
		}
		fmt.Fprintf(w, "    %-18s seed %d, after %s and %s\n", m, f.Seed, history.Plural(f.SeedsRun, "seed", "seeds"), history.FormatDuration(f.Wall))
		fmt.Fprintf(w, "      reproduce: %s\n", f.Reproduce)
	}
}

// modeRank orders modes as reports show them, any mode harness.Modes does
// not list after those.
func modeRank(m history.Mode) int {
	if i := slices.Index(harness.Modes, m); i >= 0 {
		return i
	}
	return len(harness.Modes)
}
