package labtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// Lock is a lock implementation as the code under test calls it.
type Lock = realtime.Lock

// Lease is one held lock.
type Lease = realtime.Lease

// ErrHeld is what Lock.Acquire returns (errors.Is) when another holder
// has the resource.
var ErrHeld = realtime.ErrHeld

// ErrNotHeld is what Lease.Renew and Lease.Release return (errors.Is; a
// lock may wrap its own error with it) for a lease that is no longer live.
var ErrNotHeld = realtime.ErrNotHeld

// Option changes how Run runs.
type Option func(*config)

type config struct {
	disc     history.Discipline // "" for the lock's own: fenced with a fence
	duration time.Duration
	grace    time.Duration
	store    realtime.Store
	dir      string
	name     string
	// noStaleWrites fails a naive run on its stale writes; inconclusive
	// lets a run that left the lock (or its writes) untested pass.
	noStaleWrites, inconclusive bool
	// keepGoing runs a scenario (and a battery) to its end past the
	// first counterexample of the lock's own safety.
	keepGoing bool
	// seeds: CheckVirtual runs its battery over this many seeds of drawn
	// fault mixes (Seeds); 0 for the battery's own seeds.
	seeds int
	// battery, set in Check, is where a scenario is in the battery
	// ("battery 2/4"): the run logs a line, and leaves an inconclusive
	// finding to the battery's sum.
	battery string
}

// Naive makes the holders check their lease's Deadline and write straight
// to the resource.
func Naive() Option { return func(c *config) { c.disc = history.DisciplineNaive } }

// Fenced makes the holders write through the resource's gate with the
// lock's fence. A lock without a fence cannot run fenced: Run fails.
func Fenced() Option { return func(c *config) { c.disc = history.DisciplineFenced } }

// RequireNoStaleWrites fails the test on stale writes of a naive
// discipline too. Without it they are the write path's finding, logged and
// counted in Result (StaleWritesLanded, Findings.Writes), not a failure:
// any lock written to without a fence lands them when a holder stalls
// past its lease, and the lock is not at fault.
func RequireNoStaleWrites() Option { return func(c *config) { c.noStaleWrites = true } }

// AllowInconclusive lets a run pass whose lock or writes finding is
// inconclusive: the run never put the property to the test (no takeover
// tested exclusion; no two holders acted at once, so no write could be
// stale). Without it such a run fails, saying what was not exercised:
// nothing is passed that was not tested.
func AllowInconclusive() Option { return func(c *config) { c.inconclusive = true } }

// KeepGoing runs each scenario to its end, and Check every scenario of
// its battery, after the first counterexample of the lock's own safety
// (a mutual-exclusion violation, a breach of the lease contract). Without
// it a run stops there: the lab judges the events of the run as they
// happen, ends the run once the lock finding is broken, and the verdict
// is the history's, recorded up to then; Check runs no further scenario.
func KeepGoing() Option { return func(c *config) { c.keepGoing = true } }

// Duration sets the run's length (the scenario's own by default).
func Duration(d time.Duration) Option { return func(c *config) { c.duration = d } }

// Grace sets how long Run waits, once the run's duration is over, for a
// call to the lock still under way (realtime.DefaultGrace, 10s, by
// default). A call that has not returned by then fails the run, which
// ends without it: Run returns within the duration plus the grace (and
// the probe's bound plus the grace) whatever the lock does.
func Grace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// Store keeps the resources in s (realtime/sqlitestore.NewSQLiteStore, ...) instead of
// memory. Run does not close it.
func Store(s realtime.Store) Option { return func(c *config) { c.store = s } }

// HistoryDir is where a failed run's history file is kept (the system's
// temporary directory by default). A passing run's is removed.
func HistoryDir(dir string) Option { return func(c *config) { c.dir = dir } }

// Name names the lock: the run's one mode, in the history header, the
// report and the failure ("lock" by default; its Go type is the header's
// Library).
func Name(name string) Option { return func(c *config) { c.name = name } }

// Result is what the run found: the checker's report of the one mode it
// ran, its counters (StaleWritesLanded, MutualExclusionViolations,
// Takeovers, ...) and its three findings (Findings: the lock's own safety,
// the write path, what the run exercised), and where the history file is
// (kept only when the run failed).
type Result struct {
	*history.Report
	// Scenario is the name of the scenario that ran.
	Scenario string
	// Contender is what the history header says of the lock.
	Contender history.Contender
	// MutualExclusion lists the first mutual-exclusion violations of
	// MutualExclusionViolations, from the report's counterexamples.
	MutualExclusion []history.Counterexample
	// HistoryPath is the history file; it exists only if Failed.
	HistoryPath string
	// NeverReturned, if set, is why the run ended without some calls to
	// the lock: they were still under way a grace after its duration
	// (each is a library error in the history, which ends there).
	NeverReturned *realtime.NeverReturnedError
	// Stopped: the run ended at the first counterexample of the lock's
	// own safety, before its duration (see KeepGoing).
	Stopped bool
	// Failed: the run failed the test: a broken lock, stale writes of
	// a fenced discipline (or of a naive one under
	// RequireNoStaleWrites), a finding left inconclusive (unless
	// AllowInconclusive), or a call that never returned.
	Failed bool
}

// ProbeResource is the resource Run takes once before the run, to see
// whether the lock's leases have a fence.
const ProbeResource = "labtest-probe"

// Run puts lock under scenario (a built-in's name, or a path to a
// scenario or fixture file) in real time, logs its three findings, and
// fails t, naming the finding, its first counterexample and the history
// file it kept, when the lock's own finding is broken (it granted a
// resource twice, broke its lease contract or returned an error it never
// should), when stale writes landed through the gate of a fenced
// discipline (of a naive one only under RequireNoStaleWrites), when the
// lock or writes finding is inconclusive (unless AllowInconclusive), or
// when a call to it never returned (see Grace: Run returns within the
// run's duration and the grace whatever the lock does). The run stops at
// the first counterexample of the lock's own safety (KeepGoing runs it to
// its end). A problem with the arguments fails t at once: no such
// scenario, or one no user's lock can play (a coordinator restart, a
// drift of the lab coordinator's clock), before the lock is called;
// Fenced on a lock without a fence, after the probe.
func Run(t testing.TB, scenarioName string, lock Lock, opts ...Option) *Result {
	t.Helper()
	c := newConfig(opts)
	sc, err := load(scenarioName)
	if err != nil {
		t.Fatalf("labtest: %v", err)
		return nil
	}
	return runScenario(t, c.scenario(sc), lock, c)
}

// scenario is sc as c runs it: its duration Duration's, if set.
func (c config) scenario(sc spec.Scenario) spec.Scenario {
	if c.duration > 0 {
		sc.Duration = c.duration
	}
	return sc
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.grace <= 0 {
		c.grace = realtime.DefaultGrace
	}
	return c
}

// runScenario is Run of scenario sc, once loaded: it refuses what the
// lock cannot play, probes the lock, runs sc, and reports the run (see
// report).
func runScenario(t testing.TB, sc spec.Scenario, lock Lock, c config) *Result {
	t.Helper()
	ctx := t.Context()
	info, err := contender(ctx, lock, sc, c)
	if err != nil {
		t.Fatalf("labtest: %v", err)
		return nil
	}
	res, err := run(ctx, sc, lock, info, c)
	if err != nil {
		t.Fatalf("labtest: %v", err)
		return nil
	}
	report(t, sc, res, c)
	return res
}

// contender is what the history header says of lock under c on sc: its
// name, its Go type, whether its leases have a fence (a probe takes the
// lock once) and its discipline. It refuses, before the probe calls the
// lock, a scenario no user's lock can play (checkUserLock), and Fenced on
// a lock without a fence.
func contender(ctx context.Context, lock Lock, sc spec.Scenario, c config) (history.Contender, error) {
	name := history.Mode(cmp(c.name, "lock"))
	if err := checkUserLock(string(name), sc); err != nil {
		return history.Contender{}, err
	}
	info, err := probe(ctx, lock, sc.TTL, c.grace)
	if err != nil {
		return history.Contender{}, err
	}
	info.Name = name
	info.Library = fmt.Sprintf("%T", lock)
	switch {
	case c.disc == history.DisciplineFenced && !info.Fence:
		return history.Contender{}, fmt.Errorf("%s cannot run fenced: its leases have no fence (Lease.Fence reports false); run it naive", info.Name)
	case c.disc == "" && info.Fence:
		info.Discipline = history.DisciplineFenced
	case c.disc == "":
		info.Discipline = history.DisciplineNaive
	default:
		info.Discipline = c.disc
	}
	return info, nil
}

// report logs the findings of res, the run of sc (a line, in a battery),
// and fails t as Run says, naming the scenario, the finding and the
// history file.
func report(t testing.TB, sc spec.Scenario, res *Result, c config) {
	t.Helper()
	info := res.Contender
	if c.battery == "" {
		t.Logf("labtest: %s (%s) on %s:\n%s", info.Name, info.Discipline, sc.Name, res.findings())
	} else {
		t.Logf("labtest: %s %s: %s", c.battery, sc.Name, res.line())
	}
	switch {
	case res.NeverReturned != nil:
		t.Errorf("labtest: %s (%s): %v\nhistory: %s (lab check %s judges it again)",
			info.Name, info.Discipline, res.NeverReturned, res.HistoryPath, res.HistoryPath)
	case res.Failed:
		t.Errorf("labtest: %s (%s) on %s: %s\nhistory: %s (lab check %s judges it again)",
			info.Name, info.Discipline, sc.Name, strings.Join(res.failures(c), "; "), res.HistoryPath, res.HistoryPath)
	}
}

func cmp(s, dflt string) string {
	if s != "" {
		return s
	}
	return dflt
}

// load is the built-in scenario name, or the scenario of the file name.
func load(name string) (spec.Scenario, error) {
	if sc, ok := spec.Builtin(name); ok {
		return sc, nil
	}
	if _, err := os.Stat(name); err != nil {
		return spec.Scenario{}, fmt.Errorf("scenario %q is neither a built-in (%s) nor a file: %w", name, strings.Join(spec.BuiltinNames(), ", "), err)
	}
	return scenario.Load(name)
}

// probe takes the lock once, to see what its leases are, and releases it.
// A call that has not returned a grace after its context ended fails it:
// the call is left where it is stuck.
func probe(ctx context.Context, lock Lock, ttl, grace time.Duration) (history.Contender, error) {
	if lock == nil {
		return history.Contender{}, errors.New("a nil Lock")
	}
	pctx, cancel := context.WithTimeout(ctx, max(10*ttl, 10*time.Second))
	defer cancel()
	type probed struct {
		info history.Contender
		err  error
	}
	// Buffered: a probe that returns after Run gave up on it leaves
	// nothing waiting.
	done := make(chan probed, 1)
	var call atomic.Value // the call under way, for the failure
	go func() {
		// A panic of the lock's is the probe's error, naming the call:
		// not a test binary ended by it.
		defer func() {
			if p := recover(); p != nil {
				done <- probed{err: fmt.Errorf("the probe's %s of %s panicked: %v", call.Load(), ProbeResource, p)}
			}
		}()
		info, err := probeCalls(pctx, lock, ttl, func(c string) { call.Store(c) })
		done <- probed{info, err}
	}()
	select {
	case p := <-done:
		return p.info, p.err
	case <-pctx.Done():
	}
	select {
	case p := <-done:
		return p.info, p.err
	case <-time.After(grace):
		return history.Contender{}, fmt.Errorf("the probe's %s of %s never returned, %s after its context ended: the lock blocks without heeding its context (its goroutine stays blocked in the call, which nothing can stop); no run was made",
			call.Load(), ProbeResource, history.FormatDuration(grace))
	}
}

// probeCalls is the probe's calls; it names each call to at before
// making it.
func probeCalls(pctx context.Context, lock Lock, ttl time.Duration, at func(call string)) (history.Contender, error) {
	at("Acquire")
	l, err := lock.Acquire(pctx, ProbeResource, "labtest", ttl)
	if err != nil {
		return history.Contender{}, fmt.Errorf("the probe's Acquire of %s: %w", ProbeResource, err)
	}
	if l == nil {
		return history.Contender{}, errors.New("the probe's Acquire returned no lease and no error")
	}
	info := history.Contender{Generations: realtime.GenerationsObserved}
	if _, ok := l.Fence(); ok {
		info.Fence, info.Generations = true, realtime.GenerationsFence
	} else if _, ok := l.(realtime.Ordered); ok {
		info.Generations = realtime.GenerationsServer
	}
	at("Release")
	if err := l.Release(pctx); err != nil {
		return history.Contender{}, fmt.Errorf("the probe's Release of %s: %w", ProbeResource, err)
	}
	return info, nil
}

// collect writes every event of the run to the history file.
type collect struct {
	mu  sync.Mutex
	enc *history.Encoder
}

func (c *collect) Event(e history.Event) {
	c.mu.Lock()
	c.enc.Event(e)
	c.mu.Unlock()
}

func run(ctx context.Context, sc spec.Scenario, lock Lock, info history.Contender, c config) (*Result, error) {
	backend := &realtime.Contender{Info: info, New: func(context.Context, history.Mode) (Lock, error) { return lock, nil }}
	mode := info.Name
	f, err := os.CreateTemp(c.dir, "labtest-"+sc.Name+"-*.jsonl")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	keep := false
	defer func() {
		f.Close()
		if !keep {
			os.Remove(path)
		}
	}()
	events := &collect{}
	opts := realtime.Options{Modes: []history.Mode{mode}, Backend: backend, Store: c.store,
		Subscribers: []history.Subscriber{events}, Grace: c.grace}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var watch *realtime.LockWatch
	if !c.keepGoing {
		opts, watch = realtime.WatchLocks(opts, stop)
	}
	r, err := realtime.New(sc, opts)
	if err != nil {
		return nil, err
	}
	if watch != nil {
		watch.Start(r.Header())
	}
	enc, err := history.NewEncoder(f, r.Header())
	if err != nil {
		return nil, err
	}
	events.enc = enc
	out, runErr := r.Run(runCtx)
	_, stopped := watch.Stopped()
	if stopped && ctx.Err() == nil && errors.Is(runErr, context.Canceled) {
		runErr = nil // the watch ended the run, at its first counterexample
	}
	var stuck *realtime.NeverReturnedError
	if errors.As(runErr, &stuck) {
		// The lock is not closed: its Close could wait for the call that
		// never returned. The run's record is whole up to its end.
		runErr = nil
	} else {
		runErr = errors.Join(runErr, backend.Close())
	}
	if runErr != nil {
		return nil, runErr
	}
	if err := enc.Flush(); err != nil {
		return nil, fmt.Errorf("history file %s: %w", path, err)
	}
	h := r.Header()
	res := &Result{Report: out.Modes[mode], Scenario: sc.Name, HistoryPath: path, Contender: h.Contender(mode), NeverReturned: stuck, Stopped: stopped}
	res.MutualExclusion = res.counterexamples(history.MutualExclusionViolation)
	res.Failed = stuck != nil || len(res.failures(c)) > 0
	keep = res.Failed
	return res, nil
}

// counterexamples are the report's counterexamples of kind k.
func (r *Result) counterexamples(k history.CounterexampleKind) []history.Counterexample {
	var out []history.Counterexample
	for _, x := range r.Counterexamples {
		if x.Kind == k {
			out = append(out, x)
		}
	}
	return out
}

// failures says each finding of r that fails the test under c's options,
// with its first counterexample; none when the run passes.
func (r *Result) failures(c config) []string {
	f := r.Findings
	var out []string
	if f.Lock.Verdict == history.FindingBroken {
		s := "the lock is broken: " + f.Lock.Reason
		if len(r.MutualExclusion) > 0 {
			s += "; first: " + r.MutualExclusion[0].Detail
		}
		out = append(out, s)
	}
	// A naive discipline's writes fail the test only when asked, or when
	// broken by a violation of the record, not by stale writes alone.
	writesFail := r.Contender.Discipline == history.DisciplineFenced || c.noStaleWrites ||
		(len(r.Violations) > 0 && f.Lock.Verdict != history.FindingBroken)
	if f.Writes.Verdict == history.FindingBroken && writesFail {
		s := "the writes are broken: " + f.Writes.Reason
		if x := r.counterexamples(history.StaleWrite); len(x) > 0 {
			s += fmt.Sprintf("; first at %s on %s: %s", history.FormatMS(x[0].AtMS), x[0].Resource, x[0].Detail)
		}
		out = append(out, s)
	}
	// A finding left untested is said only of a run that failed on
	// nothing else: a run stopped at its first counterexample leaves the
	// others untested.
	if !c.inconclusive && c.battery == "" && len(out) == 0 {
		for _, p := range []struct {
			name string
			f    history.Finding
		}{{"lock", f.Lock}, {"writes", f.Writes}} {
			if p.f.Verdict == history.FindingInconclusive {
				out = append(out, fmt.Sprintf("the %s finding is inconclusive: %s (labtest.AllowInconclusive() lets such a run pass)", p.name, p.f.Reason))
			}
		}
	}
	return out
}

// findings says the three findings, a line each, as Run logs them.
func (r *Result) findings() string { return formatFindings(r.Findings) }

// formatFindings says f, a line each.
func formatFindings(f history.Findings) string {
	cover := f.Coverage.Reason
	if n := f.Coverage.Counts; n != nil {
		cover += ". " + n.String()
	}
	return fmt.Sprintf("  lock:     %s: %s\n  writes:   %s: %s\n  coverage: %s: %s",
		f.Lock.Verdict, f.Lock.Reason, f.Writes.Verdict, f.Writes.Reason, f.Coverage.Verdict, cover)
}

// line says the findings' verdicts and the coverage counts on one line,
// as a battery's progress.
func (r *Result) line() string {
	f := r.Findings
	s := fmt.Sprintf("lock %s, writes %s, %d stale writes", f.Lock.Verdict, f.Writes.Verdict, r.StaleWritesLanded)
	if n := f.Coverage.Counts; n != nil {
		s += "; " + n.String()
	}
	if r.Stopped {
		s += "; stopped at the first counterexample"
	}
	return s
}
