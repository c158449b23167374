package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasefence/lab/fixtures"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/scenario"
)

const fixturesAbout = `Runs every fixture file (*.yaml, *.yml) of a directory (default ./fixtures), or
the files named, as tests: each fixture's scenario over each of its seeds, each
expectation checked against every seed's report (see go doc ./scenario for the
format). It prints one line per fixture, PASS or FAIL with its name, seeds and
time, and on FAIL the expectations that failed with what was found instead; a
file that does not load is reported as BROKEN with its errors, and the others
still run. It closes with the line "N passed, N failed".

--junit writes a JUnit XML report for CI systems; --json prints each fixture's
verdict on stdout instead of the lines (which go to stderr).

Exit status: 0 when every fixture passed, 1 when one failed, 2 when a file is
broken (or another input is bad), 130 when interrupted.`

// maxFailureLines is how many failed expectations a FAIL line lists
// without -v.
const maxFailureLines = 8

// defaultFixturesDir is where lab fixtures looks when given nothing: the
// repository's own fixtures, when run from its root.
const defaultFixturesDir = "fixtures"

var errNoFixturesDir = errors.New("no ./" + defaultFixturesDir + " directory here: with no arguments lab fixtures runs the *.yaml and *.yml files of " +
	"./" + defaultFixturesDir + " (run it from the repository's root), or name a directory or files (lab fixtures DIR|FILE ...)")

// fixtureRun is one fixture file's fate, for the summary and JUnit.
type fixtureRun struct {
	file    string
	fixture *scenario.Fixture
	outcome *fixtures.Outcome
	loadErr error
	skipped error         // why the fixture cannot run with the flags given
	done    chan struct{} // closed when the run ended (or never started)
}

// ended reports whether the run is over.
func (r *fixtureRun) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *fixtureRun) name() string {
	if r.fixture != nil {
		return r.fixture.Name
	}
	return strings.TrimSuffix(filepath.Base(r.file), filepath.Ext(r.file))
}

func (r *fixtureRun) passed() bool { return r.loadErr == nil && r.outcome != nil && r.outcome.Passed() }

// fixtures is `lab fixtures`.
func (a *app) fixtures(ctx context.Context, args []string) int {
	fs := a.newFlagSet("fixtures", "[dir|file ...] [--junit PATH] [--json] [-v]", fixturesAbout)
	junit := fs.String("junit", "", "write a JUnit XML report to `PATH` (creating its directory)")
	verbose := fs.Bool("v", false, "list every expectation checked, and every failure")
	jobs := fs.Int("jobs", 0, "seeds run at once; 0 means one per core")
	parallel := fs.Int("parallel", 1, "real-time fixtures run at once (each waits on the wall clock for most of its time)")
	asJSON := fs.Bool("json", false, "print the verdicts as JSON on stdout (the lines go to stderr)")
	contenders := fs.String("contenders", "", "run only these of each fixture's contenders, `NAME,...`, and their expectations; a fixture that runs none of them is skipped")
	var bf backendFlags
	bf.register(fs)
	bf.backend = "" // unset: each fixture runs on the backend it names
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if *jobs < 0 {
		return a.badInput("fixtures", fmt.Errorf("--jobs: must be >= 0, got %d", *jobs))
	}
	if *parallel < 1 {
		return a.badInput("fixtures", fmt.Errorf("--parallel: must be >= 1, got %d", *parallel))
	}
	if len(pos) == 0 {
		if !isDir(defaultFixturesDir) {
			return a.badInput("fixtures", errNoFixturesDir)
		}
		pos = []string{defaultFixturesDir}
	}
	files, err := fixtureFiles(pos)
	if err != nil {
		return a.badInput("fixtures", err)
	}
	var only []history.Mode
	if *contenders != "" {
		if only, err = registry.ParseContenders(strings.Split(*contenders, ",")); err != nil {
			return a.badInput("fixtures", fmt.Errorf("--contenders: %w", err))
		}
	}
	runner, err := bf.fixtureRunner()
	if err != nil {
		return a.badInput("fixtures", err)
	}
	var junitFile *os.File
	if *junit != "" {
		// Created first: a report that cannot be written fails before
		// anything runs.
		if err := os.MkdirAll(filepath.Dir(*junit), 0o755); err != nil {
			return a.badInput("fixtures", fmt.Errorf("--junit: %w", err))
		}
		if junitFile, err = os.Create(*junit); err != nil {
			return a.badInput("fixtures", fmt.Errorf("--junit: %w", err))
		}
		defer junitFile.Close()
	}

	start := time.Now()
	stdout := a.stdout
	if *asJSON {
		a.stdout = a.stderr // the lines, for a person; stdout is the JSON
	}
	runs := a.runFixtures(ctx, files, &bf, only, runner, *jobs, *parallel, *verbose)
	if junitFile != nil {
		if err := writeJUnit(junitFile, runs, time.Since(start)); err != nil {
			fmt.Fprintf(a.stderr, "lab fixtures: --junit: %v\n", err)
		} else if err := junitFile.Close(); err != nil {
			fmt.Fprintf(a.stderr, "lab fixtures: --junit: %v\n", err)
		}
	}
	code := a.fixturesSummary(runs, len(files), ctx.Err() != nil)
	if *asJSON {
		a.stdout = stdout
		if err := writeFixturesJSON(stdout, runs); err != nil {
			fmt.Fprintf(a.stderr, "lab fixtures: --json: %v\n", err)
		}
	}
	return code
}

// runFixtures loads and runs each file until ctx ends, printing each one's
// line in file order as soon as it and every file before it have ended.
// Up to parallel real-time fixtures run at once: each waits on the wall
// clock for most of its seconds. A simulated fixture runs alone, its
// seeds spread over the cores, once the real-time ones before it ended.
func (a *app) runFixtures(ctx context.Context, files []string, bf *backendFlags, only []history.Mode,
	runner fixtures.RealRunner, jobs, parallel int, verbose bool) []*fixtureRun {
	var runs []*fixtureRun
	var inFlight sync.WaitGroup
	slots := make(chan struct{}, max(parallel, 1))
	printed := 0
	// printEnded prints the ended prefix of runs, in order; with wait, it
	// waits for each of the first n instead.
	printEnded := func(n int, wait bool) {
		for ; printed < n; printed++ {
			r := runs[printed]
			if !wait && !r.ended() {
				return
			}
			<-r.done
			a.printRun(r, verbose)
		}
	}
	for _, f := range files {
		if ctx.Err() != nil {
			break
		}
		r := a.prepareFixture(f, bf, only)
		if r.loadErr == nil && r.skipped == nil && !r.fixture.RealTime() {
			inFlight.Wait() // a simulated fixture runs alone
			printEnded(len(runs), true)
		}
		runs = append(runs, r)
		if r.loadErr != nil || r.skipped != nil {
			close(r.done)
			printEnded(len(runs), false)
			continue
		}
		slots <- struct{}{}
		inFlight.Add(1)
		run := func() {
			defer func() { <-slots; inFlight.Done(); close(r.done) }()
			prog := a.newProgress(r.fixture.Name)
			prog.enabled = prog.enabled && parallel <= 1 // one bar at a time
			r.outcome = fixtures.Run(ctx, r.fixture, fixtures.RunOptions{Jobs: jobs, Runner: runner, Progress: func(done, total int) {
				prog.show(float64(done)/float64(total), fmt.Sprintf("%d/%d seeds", done, total))
			}})
			prog.clear()
		}
		if r.fixture.RealTime() && parallel > 1 {
			go run()
		} else {
			run()
		}
		printEnded(len(runs), false)
	}
	printEnded(len(runs), true)
	return runs
}

// prepareFixture loads f and decides whether it runs with the flags
// given; a fixture that does not load, or cannot run with them, says why
// in its run.
func (a *app) prepareFixture(f string, bf *backendFlags, only []history.Mode) *fixtureRun {
	r := &fixtureRun{file: f, done: make(chan struct{})}
	if r.fixture, r.loadErr = scenario.LoadFixture(f); r.loadErr != nil {
		return r
	}
	if only != nil {
		if err := r.fixture.Only(only); err != nil {
			r.skipped = fmt.Errorf("not with --contenders: %w", err)
			return r
		}
	}
	if bf.backend != "" {
		if err := r.fixture.SetBackend(bf.backend); err != nil {
			r.skipped = fmt.Errorf("not on --backend %s: %w", bf.backend, err)
		}
	}
	return r
}

// printRun prints the line (and details) of a run that ended.
func (a *app) printRun(r *fixtureRun, verbose bool) {
	switch {
	case r.loadErr != nil:
		a.printBroken(r)
	case r.skipped != nil:
		fmt.Fprintf(a.stdout, "SKIP %s: %v\n", r.fixture.Name, r.skipped)
	default:
		a.printFixture(r, verbose)
	}
}

// fixturesSummary prints the closing lines of `lab fixtures` and returns
// its exit code.
func (a *app) fixturesSummary(runs []*fixtureRun, files int, interrupted bool) int {
	passed, failed, broken, skipped := 0, 0, 0, 0
	for _, r := range runs {
		switch {
		case r.skipped != nil:
			skipped++
		case r.loadErr != nil:
			broken++
			failed++
		case r.passed():
			passed++
		default:
			failed++
		}
	}
	if broken > 0 {
		fmt.Fprintf(a.stdout, "%d of them could not be loaded (BROKEN above).\n", broken)
	}
	if interrupted {
		fmt.Fprintf(a.stdout, "INTERRUPTED: %d of %s ran.\n", len(runs), history.Plural(files, "fixture file", "fixture files"))
	}
	if skipped > 0 {
		fmt.Fprintf(a.stdout, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	} else {
		fmt.Fprintf(a.stdout, "%d passed, %d failed\n", passed, failed)
	}
	switch {
	case broken > 0:
		return exitUsage
	case failed > 0:
		return exitFailed
	case interrupted:
		return exitInterrupted
	}
	return exitOK
}

// fixtureFiles expands directories to their *.yaml and *.yml files, in
// name order; files named outright are taken as they are.
func fixtureFiles(args []string) ([]string, error) {
	var files []string
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, arg)
			continue
		}
		entries, err := os.ReadDir(arg)
		if err != nil {
			return nil, err
		}
		var found []string
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				found = append(found, filepath.Join(arg, e.Name()))
			}
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s holds no fixture files (*.yaml, *.yml)", arg)
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	return files, nil
}

func (a *app) printBroken(r *fixtureRun) {
	fmt.Fprintf(a.stdout, "BROKEN %s (%s)\n", r.name(), r.file)
	for _, line := range strings.Split(r.loadErr.Error(), "\n") {
		fmt.Fprintf(a.stdout, "    %s\n", line)
	}
}

func (a *app) printFixture(r *fixtureRun, verbose bool) {
	o := r.outcome
	verdict := "PASS"
	if !o.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(a.stdout, "%s %s (%s, %s)\n", verdict, r.fixture.Name, seedsText(r.fixture.Seeds), history.FormatDuration(o.Elapsed))
	if verbose {
		for _, e := range r.fixture.Expect {
			fmt.Fprintf(a.stdout, "    checks %s: %s\n", e.Field, e.Want)
		}
	}
	if o.Err != nil {
		msg := o.Err.Error()
		if errors.Is(o.Err, context.Canceled) {
			msg = "interrupted after " + ofSeeds(len(o.Seeds), len(r.fixture.Seeds))
		}
		fmt.Fprintf(a.stdout, "    %s\n", msg)
	}
	failures := o.Failures()
	for i, f := range failures {
		if i == maxFailureLines && !verbose {
			fmt.Fprintf(a.stdout, "    ... and %s (-v lists them all)\n", history.Plural(len(failures)-i, "more failure", "more failures"))
			break
		}
		loc := r.file
		if f.Expectation.Line > 0 {
			loc = fmt.Sprintf("%s:%d", r.file, f.Expectation.Line)
		}
		fmt.Fprintf(a.stdout, "    %s: %s\n", loc, f)
	}
	if repro := r.reproduce(); repro != "" {
		fmt.Fprintf(a.stdout, "    reproduce: %s\n", repro)
	}
}

// ofSeeds is "1 of 1 seed", "3 of 200 seeds": how many of a count of seeds.
func ofSeeds(n, total int) string {
	return fmt.Sprintf("%d of %s", n, history.Plural(total, "seed", "seeds"))
}

// seedsText writes a fixture's seeds briefly: "seed 1", "seeds 1-200",
// "seeds 1, 5, 9".
func seedsText(seeds []uint64) string {
	if len(seeds) == 1 {
		return fmt.Sprintf("seed %d", seeds[0])
	}
	contiguous := true
	for i := 1; i < len(seeds); i++ {
		contiguous = contiguous && seeds[i] == seeds[i-1]+1
	}
	if contiguous {
		return fmt.Sprintf("seeds %d-%d", seeds[0], seeds[len(seeds)-1])
	}
	parts := make([]string, 0, 6)
	for i, s := range seeds {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("... (%d seeds)", len(seeds)))
			break
		}
		parts = append(parts, fmt.Sprint(s))
	}
	return "seeds " + strings.Join(parts, ", ")
}
