package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tracing/otelexport"
)

const runAbout = `Runs a scenario headless, as fast as it goes, in both modes (or one) on the same
faults, and prints a report: a column of counters per mode, the first
counterexamples with their times, holders and fences, the verdict and the digest.

The scenario is a built-in name (see lab scenarios), a scenario file or a
fixture file (its scenario, with its first seed); the default is ` + spec.DefaultScenario + `.
Every harness knob can be set by a flag; flags win over the file.

--json prints the JSON report instead (schema: go doc ./cmd/lab). --html writes
a self-contained page of the run's timeline. --events writes the run's history
(JSON Lines: go doc ./cmd/lab), which lab check judges again to the same report.
--trace sends the run to an OTLP collector (e.g. Jaeger) or a file. --swarm runs
the scenario the swarm runs for --seed: the command lab swarm prints for a
failing seed. --lock-delays 0,1s,2s,4s runs the scenario with each
lock-delay for --seeds seeds, on the simulator or in real time on --backend,
and prints one table of the stale writes landed and the idle time each delay
gives (try: lab run lock-delay --lock-delays 0,1s,2s,4s --seeds 5).
--stop-at-first ends a real-time run (--backend, its agents in-process) at
the first counterexample of a lock's own safety, judged from its events as
they happen: the report covers what ran up to it and says which lock broke.
It is refused on the simulator, which runs a scenario whole in a fraction of
a second, and for agents as processes, whose events it does not hear.

Exit status: 0 when nothing broke (the verdict says inconclusive where the run
left a property untested), 1 when the fenced mode broke an invariant, a lock
broke mutual exclusion (in any mode) or the library returned an error it never
should (a bug in the lock), 2 for bad input, 130 when interrupted.`

// runConfig is everything a run needs, checked before it starts.
type runConfig struct {
	sc      spec.Scenario
	modes   []history.Mode
	json    bool
	trace   otelexport.Config
	html    *os.File // created before the run, so a bad path fails first
	events  *os.File // likewise: the history file, if asked for
	command []string // the command line that reproduces the run
	real    *realRun // the real-time runner's side, or nil for the simulator
}

// runCmd is `lab run`.
func (a *app) runCmd(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == batteryName {
		return a.runBattery(ctx, args[1:])
	}
	fs := a.newFlagSet("run", "[scenario|file] [flags]", runAbout)
	var sf scenarioFlags
	sf.register(fs)
	var rf runFlags
	rf.register(fs, "print the JSON report instead of the text one")
	trace := fs.String("trace", "none", "send the run's trace to otlp[=URL], otlp-http[=URL], otlp-grpc[=URL], file=PATH, or none")
	htmlPath := fs.String("html", "", "also write a self-contained HTML page of the run to `PATH`")
	eventsPath := fs.String("events", "", "also write the run's history, one JSON event a line, to `PATH` (lab check reads it)")
	swarm := fs.Bool("swarm", false, "run the scenario lab swarm runs for --seed (its fault knobs drawn from the seed)")
	lockDelays := fs.String("lock-delays", "", "run the scenario with each lock-delay of `LIST` (e.g. 0,1s,2s,4s), on the simulator or --backend, and print one table of stale writes and idle time")
	seeds := fs.Int("seeds", 1, "with --lock-delays, run each delay for N seeds from --seed, counts summed")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if len(pos) > 1 {
		return a.badInput("run", &argumentsError{takesOne: true, got: pos})
	}
	var arg string
	if len(pos) == 1 {
		arg = pos[0]
	}
	cfg, err := prepareRun(arg, &sf, &rf.backend, &rf.modes, *trace, *htmlPath, *eventsPath, *swarm)
	if err != nil {
		return a.badInput("run", err)
	}
	cfg.json = rf.json
	cfg.command = append([]string{"lab", "run"}, args...)
	if *seeds < 1 || *seeds > 1000 {
		cfg.removeOutputs()
		return a.badInput("run", fmt.Errorf("--seeds: must be in [1, 1000], got %d", *seeds))
	}
	if rf.stopAtFirst {
		if err := stopAtFirstApplies(cfg, &rf.backend); err != nil {
			cfg.removeOutputs()
			return a.badInput("run", err)
		}
		cfg.real.stopAtFirst = true
	}
	if *lockDelays != "" {
		delays, err := parseLockDelays(*lockDelays, cfg.sc)
		if err == nil && (cfg.events != nil || *trace != "none") {
			err = errors.New("--lock-delays runs the scenario many times and prints one table: no --events or --trace")
		}
		if err == nil && rf.stopAtFirst {
			err = errStopAtFirstSweep
		}
		if err != nil {
			cfg.removeOutputs()
			return a.badInput("run", err)
		}
		return a.sweepLockDelays(ctx, cfg, delays, *seeds)
	}
	return a.execute(ctx, cfg)
}

// prepareRun checks everything a run needs before anything runs.
func prepareRun(arg string, sf *scenarioFlags, bf *backendFlags, mf *modeFlags, trace, htmlPath, eventsPath string, swarm bool) (*runConfig, error) {
	sc, source, fx, err := loadScenario(arg)
	if err != nil {
		return nil, err
	}
	if fx != nil {
		bf.fromFixture(fx)
	}
	if err := sf.apply(&sc, source); err != nil {
		return nil, err
	}
	if swarm {
		sc = harness.SwarmScenario(sc, sf.swarmRanges(), sc.Seed)
		if err := sc.Validate(); err != nil {
			return nil, fmt.Errorf("the swarm's scenario for seed %d: %w", sc.Seed, err)
		}
	}
	tc, err := otelexport.ParseExporter(trace)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	rc, _, modes, err := configModes(bf, mf, fx, sc)
	if err != nil {
		return nil, err
	}
	cfg := &runConfig{sc: sc, modes: modes, trace: tc}
	if rc != nil {
		cfg.real = &realRun{config: *rc, agents: bf.agents}
	}
	if htmlPath != "" {
		f, err := os.Create(htmlPath)
		if err != nil {
			return nil, fmt.Errorf("--html: %w", err)
		}
		cfg.html = f
	}
	if eventsPath != "" {
		f, err := os.Create(eventsPath)
		if err != nil {
			cfg.removeOutputs()
			return nil, fmt.Errorf("--events: %w", err)
		}
		cfg.events = f
	}
	return cfg, nil
}

// removeOutputs deletes the files made for a run that did not happen, so
// that no empty page or history is left behind.
func (cfg *runConfig) removeOutputs() {
	for _, f := range []*os.File{cfg.html, cfg.events} {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
}

// execute runs cfg, reports, and returns the exit code.
func (a *app) execute(ctx context.Context, cfg *runConfig) int {
	rn, err := a.startRunner(ctx, cfg)
	if err != nil && ctx.Err() != nil {
		// Ctrl-C while the backend was starting: what it started is gone,
		// and nothing ran.
		cfg.removeOutputs()
		fmt.Fprintln(a.stderr, "lab run: interrupted while the backend was starting; nothing ran.")
		return exitInterrupted
	}
	if err != nil {
		cfg.removeOutputs()
		return a.badInput("run", err)
	}
	defer rn.close()
	out, err := a.openOutputs(ctx, cfg, rn)
	if err != nil {
		cfg.removeOutputs() // nothing ran
		return a.badInput("run", err)
	}
	if cfg.html != nil {
		defer cfg.html.Close()
	}
	if cfg.events != nil {
		defer cfg.events.Close()
	}
	prog := a.newProgress("run " + cfg.sc.Name)
	out.watcher = newRunWatcher(rn.sc, cfg.modes, prog)

	res, runErr := rn.run(ctx, out.subscribers())
	prog.clear()
	interrupted := runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err())
	brokeFirst, stoppedEarly := cfg.real.stopped()
	// A lock's call that never returned ended the run a grace after its
	// duration: what it recorded is reported and kept, and the call is a
	// library error of its mode, which fails the run.
	neverReturned := errors.Is(runErr, realtime.ErrNeverReturned)
	if runErr != nil && !interrupted && !neverReturned {
		out.sink.finish(a.stderr, out.watcher.lastAt)
		return a.badInput("run", runErr)
	}
	if a.afterRun != nil {
		a.afterRun(res)
	}
	ended := cfg.sc.Duration
	if interrupted || stoppedEarly {
		ended = out.watcher.lastAt
	}
	stop := report.Stop{Interrupted: interrupted, At: out.watcher.lastAt}
	if stoppedEarly && !interrupted {
		stop = stoppedAtFirst(brokeFirst, out.watcher.lastAt)
	}
	eventsFailed := a.closeOutputs(cfg, out, res, ended, stop)
	if cfg.json {
		if err := report.JSON(a.stdout, res, stop, rn.info); err != nil {
			fmt.Fprintf(a.stderr, "lab run: %v\n", err)
		}
	} else {
		report.Text(a.stdout, &rn.header, res, stop, rn.info)
	}
	if note := noRetryNote(cfg.sc); note != "" {
		fmt.Fprintln(a.stderr, "lab run: "+note)
	}
	if neverReturned {
		fmt.Fprintf(a.stderr, "lab run: %v\n", runErr)
	}
	if stop.By != "" {
		fmt.Fprintf(a.stderr, "lab run: stopped at %s: the report covers what ran before %s.\n", history.FormatDuration(stop.At), stop.By)
	}
	switch {
	case res.Failed():
		a.reportBug(res, commandLine(cfg.command...))
		return exitFailed
	case res.Vacuous() && !stop.Interrupted:
		fmt.Fprintln(a.stderr, vacuousNote("run"))
		return exitFailed
	case eventsFailed:
		return exitUsage
	case interrupted:
		fmt.Fprintf(a.stderr, "lab run: interrupted at %s of virtual time; the report covers what ran.\n", history.FormatDuration(stop.At))
		return exitInterrupted
	}
	return exitOK
}

// noRetryNote is a note for a scenario that loses messages and resends
// none, or "": its report counts lost messages and 0 retries, which reads
// as a lab that forgot to retry unless it is said why.
func noRetryNote(sc spec.Scenario) string {
	n := sc.Network
	if (n.DropRequests == 0 && n.DropReplies == 0) || (n.RetryAfter > 0 && n.MaxRetries > 0) {
		return ""
	}
	return fmt.Sprintf("note: %s loses messages but resends none (retry_after %s, max_retries %d): an agent whose acquire or its reply is lost "+
		"gives up after %s; --retry-after 200ms --max-retries 3 resends it under the same request id",
		sc.Name, history.FormatDuration(n.RetryAfter), n.MaxRetries, history.FormatDuration(agent.RetryWait(&sc)))
}

// runner is the runner a run goes on: the simulator, or a real-time runner
// made before the outputs that need its header (its subscribers join it
// before it runs).
type runner struct {
	sc     spec.Scenario // what runs: a real backend may scale the times
	header history.Header
	info   report.Runner
	run    func(ctx context.Context, subs []history.Subscriber) (*history.Result, error)
	close  func()
}

func (a *app) startRunner(ctx context.Context, cfg *runConfig) (*runner, error) {
	rn := &runner{sc: cfg.sc, header: registry.Header(cfg.sc, cfg.modes), info: report.Runner{Backend: backendSim}, close: func() {}}
	rn.run = func(ctx context.Context, subs []history.Subscriber) (*history.Result, error) {
		return harness.Run(ctx, cfg.sc, harness.RunOptions{Modes: cfg.modes, Subscribers: subs})
	}
	rr := cfg.real
	if rr == nil {
		return rn, nil
	}
	rr.onSetup = a.onSetup
	fan := &fanout{}
	if err := rr.open(ctx, cfg.sc, cfg.modes, []history.Subscriber{fan}); err != nil {
		return nil, err
	}
	rn.close = func() { rr.close(a.stderr, cmp.Or(a.closeLimit, closeAfterStuck)) }
	rn.sc, rn.header = rr.setup.Scenario, rr.header()
	rn.info.Backend = rn.header.Backend
	rn.run = func(ctx context.Context, subs []history.Subscriber) (*history.Result, error) {
		fan.subs = subs
		res, err := rr.run(ctx)
		if res == nil {
			return nil, err
		}
		rn.info.Real = rr.figures(res)
		return res.Result, err
	}
	return rn, nil
}

// runOutputs are what a run writes besides its report, each a subscriber
// of the run: the trace, the history file, the page's timeline, and the
// progress line's watcher.
type runOutputs struct {
	sink     *traceSink
	events   *history.Encoder
	timeline *report.Timeline
	watcher  *runWatcher
}

func (a *app) openOutputs(ctx context.Context, cfg *runConfig, rn *runner) (*runOutputs, error) {
	sink, err := startTracing(ctx, cfg.trace, rn.header)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	out := &runOutputs{sink: sink}
	if cfg.events != nil {
		// Only a run that asks for its history pays for writing it.
		out.events, err = history.NewEncoder(cfg.events, rn.header)
		if err != nil {
			return nil, fmt.Errorf("--events: %w", err)
		}
	}
	if cfg.html != nil {
		out.timeline = report.NewTimeline(rn.header)
	}
	return out, nil
}

func (out *runOutputs) subscribers() []history.Subscriber {
	var subs []history.Subscriber
	if out.sink != nil {
		subs = append(subs, out.sink.rec)
	}
	if out.events != nil {
		subs = append(subs, out.events)
	}
	if out.timeline != nil {
		subs = append(subs, out.timeline)
	}
	return append(subs, out.watcher)
}

// closeOutputs ends the trace at the instant the run stopped, and writes
// the history file and the page. It reports whether the history file
// failed: the run's history is lost, an error of the command.
func (a *app) closeOutputs(cfg *runConfig, out *runOutputs, res *history.Result, stopped time.Duration, stop report.Stop) (eventsFailed bool) {
	out.sink.finish(a.stderr, stopped)
	if out.events != nil {
		err := out.events.Flush()
		if err == nil {
			err = cfg.events.Close()
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "lab run: --events: %v\n", err)
			eventsFailed = true
		}
	}
	if out.timeline != nil {
		if err := report.HTML(cfg.html, res, out.timeline, stop); err != nil {
			fmt.Fprintf(a.stderr, "lab run: --html: %v\n", err)
		} else if err := cfg.html.Close(); err != nil {
			fmt.Fprintf(a.stderr, "lab run: --html: %v\n", err)
		} else {
			// On stderr: stdout is the report, and stays parseable.
			fmt.Fprintf(a.stderr, "lab run: wrote %s\n", cfg.html.Name())
		}
	}
	return eventsFailed
}

// reportBug says, loudly and on stderr (so --json output stays
// parseable), that the library broke a promise, and how to reproduce it.
func (a *app) reportBug(res *history.Result, reproduce string) {
	headline := fmt.Sprintf("BUG IN LEASEFENCE: %s.\n!!  This is not a problem with your scenario: the library is wrong.", bugSummary(res))
	switch violations := res.Violations(); {
	case slices.ContainsFunc(violations, func(v string) bool { return strings.Contains(v, history.UnreadableViolation) }):
		// The runner recorded what no history may hold: the lab is wrong,
		// whatever the library did.
		headline = fmt.Sprintf("BUG IN THE LAB: %s.\n!!  This is not a problem with your scenario: the runner is wrong.", bugSummary(res))
	case !ownBroke(res):
		// Only a lock of another library's (or a user's) broke: the
		// leasefence library is not at fault.
		headline = fmt.Sprintf("A LOCK UNDER TEST IS WRONG: %s.\n!!  This is not a problem with your scenario, nor with leasefence: the lock named is wrong.", bugSummary(res))
	case !slices.ContainsFunc(violations, func(v string) bool { return !strings.HasSuffix(v, history.FailoverReuseViolation) }):
		// Every violation is a fence the store lost in a failover: the
		// configuration's, which the library documents, not a lie of its.
		headline = "THE FAILOVER LOST FENCES: the coordinator's store failed over to a replica that had not\n" +
			"!!  seen the last fences, and the fenced mode was granted them again. Not a bug of the library's:\n" +
			"!!  on Redis, redislease's defaults do not survive a failover; WAIT and a watermark\n" +
			"!!  (--redis-wait-replicas N --redis-watermark) keep the fences."
	}
	fmt.Fprintf(a.stderr, `
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
!!  %s
`, headline)
	for _, v := range res.Violations() {
		fmt.Fprintf(a.stderr, "!!    - %s\n", v)
	}
	fmt.Fprintf(a.stderr, `!!  Scenario %s, seed %d, digest %s. Reproduce it with:
!!    %s
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
`, res.Scenario, res.Seed, res.Digest, reproduce)
}

// runWatcher follows a run for its progress line and remembers how far it
// got, for the report of an interrupted run.
type runWatcher struct {
	modeIndex map[history.Mode]int
	nModes    int
	duration  time.Duration
	prog      *progress
	n         int
	lastAt    time.Duration
}

func newRunWatcher(sc spec.Scenario, modes []history.Mode, prog *progress) *runWatcher {
	w := &runWatcher{modeIndex: make(map[history.Mode]int), nModes: len(modes), duration: sc.Duration, prog: prog}
	for i, m := range modes {
		w.modeIndex[m] = i
	}
	return w
}

// Event implements history.Subscriber.
func (w *runWatcher) Event(e history.Event) {
	w.lastAt = e.At
	w.n++
	if w.n&0x3ff != 0 || !w.prog.enabled {
		return
	}
	frac := (float64(w.modeIndex[e.Mode]) + float64(e.At)/float64(w.duration)) / float64(w.nModes)
	w.prog.show(frac, fmt.Sprintf("%s %s/%s", e.Mode, history.FormatDuration(e.At), history.FormatDuration(w.duration)))
}

// bugSummary says which promise a failed run saw broken.
// ownBroke reports whether a mode of the lab's own (naive, fenced: the
// leasefence library) has a violation.
func ownBroke(res *history.Result) bool {
	for _, rep := range res.Modes {
		if lib := rep.Contender.Library; (lib == "" || lib == history.LabLibrary) && len(rep.Violations) > 0 {
			return true
		}
	}
	return false
}

func bugSummary(res *history.Result) string {
	for _, v := range res.Violations() {
		if strings.Contains(v, history.UnreadableViolation) {
			return "the run recorded events the checker could not read"
		}
	}
	for _, m := range history.ReportOrder(slices.Collect(maps.Keys(res.Modes))) {
		if v := res.Modes[m].Violations; len(v) > 0 && !strings.HasPrefix(v[0], history.LibraryErrorViolation) {
			return "the " + string(m) + " mode broke a safety invariant it promises"
		}
	}
	return "the library returned an error it never should"
}

// fanout hands each event to the subscribers a run was given after its
// runner was made.
type fanout struct{ subs []history.Subscriber }

// Event implements history.Subscriber.
func (f *fanout) Event(e history.Event) {
	for _, s := range f.subs {
		s.Event(e)
	}
}
