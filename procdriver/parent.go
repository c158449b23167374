package procdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// driver is this package's entry in the registry: what agents as
// processes need and play.
var driver = registry.Must(registry.Drivers, registry.Process)

// ErrCannotPlay refuses a scenario, or a setup, that agents as processes
// cannot play.
var ErrCannotPlay = errors.New("procdriver: agents as processes cannot play it")

// Action is a fault the parent plays at true instant At of the run: Do
// runs on a goroutine of its own with the run's context, which ends with
// the run. An error it returns, unless the run is over, fails the run.
type Action struct {
	At   time.Duration
	Name string // what it did, in the run's error
	Do   func(ctx context.Context) error
}

// Options configures a Runner.
type Options struct {
	// Modes to run (default both), side by side, each with its own
	// processes, coordinator and resources. A mode that is a library's
	// contender (redsync, etcd-mutex, ...) runs on its lock, which
	// Contenders gives.
	Modes []history.Mode
	// Contenders give the locks of the modes they name, each on the
	// servers its opener started (realtime.ContenderOpener), in place of
	// the backend's coordinators: each agent's process opens the lock
	// anew on those servers (realtime.AttachContender). Without them,
	// the setup's (realtime.Setup.OpenContenders) are used; their opener
	// closes them.
	Contenders map[history.Mode]*realtime.Contender
	// Subscribers receive every event, in history order, once the run is
	// over and the resources' records are read back.
	Subscribers []history.Subscriber
	// Live hear each event as a child reports it (a dashboard's fold),
	// one at a time, before the parent acts on it: a paused process shows
	// as its agent's stall. Events of different processes may come a
	// little out of the order of their instants.
	Live []history.Subscriber
	// Kills are crashes to play besides the scenario's own (its Crashes),
	// as a scenario states them.
	Kills []spec.Crash
	// Actions are further faults the parent plays at their instants, on
	// what is outside the agents' processes (the coordinator's own
	// members, the network between them).
	Actions []Action
	// Command is a child's command line; default this program's
	// executable with ChildArg.
	Command []string
	// Stderr receives what children write to theirs (default: kept, and
	// the tail of a child's told in the error when it fails).
	Stderr io.Writer
}

// ProcessStats count what the parent did to one mode's processes.
type ProcessStats struct {
	Started int `json:"started"`
	Paused  int `json:"paused"`
	Killed  int `json:"killed"`
}

// Result is a run's verdict: the real-time runner's, with what the
// processes went through.
type Result struct {
	*realtime.Result
	Agents    string                        `json:"agents"`
	Processes map[history.Mode]ProcessStats `json:"processes"`
}

// Check reports why agents as processes cannot run sc with c in modes
// (the lab's own by default), before anything starts: the backend, the
// store and every mode's contender must be shared by the processes, as
// the registry says (registry.Entry.Shares: the in-memory coordinator and
// gates live in one process); the coordinator keeps its own time; the
// faults they play are stalls, crashes, drift of the agents' clocks and
// network delays, the rest is the in-process runner's. The error wraps
// ErrCannotPlay.
func Check(c realtime.Config, sc spec.Scenario, modes ...history.Mode) error {
	bad := func(err error) error { return fmt.Errorf("%w: %w", ErrCannotPlay, err) }
	entries := []*registry.Entry{}
	if e, ok := registry.Lookup(registry.Backends, c.Backend); ok {
		entries = append(entries, e)
	}
	if e, ok := registry.Lookup(registry.Stores, registry.StoreFor(c.Backend, c.Resource)); ok {
		entries = append(entries, e)
	}
	for _, m := range modes {
		e, ok := registry.Lookup(registry.Contenders, string(m))
		if !ok {
			return bad(fmt.Errorf("contender %s: %v", m, registry.Choice(registry.Contenders, string(m))))
		}
		entries = append(entries, e)
	}
	for _, e := range entries {
		if err := driver.Shares(e); err != nil {
			return bad(err)
		}
	}
	if sc.Clocks.CoordinatorDriftPPM != 0 {
		return bad(fmt.Errorf("the coordinator keeps its own time when agents are processes: clocks.coordinator_drift_ppm must be 0, got %v", sc.Clocks.CoordinatorDriftPPM))
	}
	if err := driver.CanPlay(sc); err != nil {
		return bad(err)
	}
	return newIDLayout(sc).check(sc)
}

// ErrNoContender: a mode names a library's contender that Options does
// not give, or whose opener this program does not link.
var ErrNoContender = errors.New("procdriver: no lock for the contender")

// RunScenario runs sc with c's backend and store, its agents as processes,
// on a setup opened for it and closed after: the whole run in one call.
// The modes' library contenders are opened with the setup, each on
// servers of its own under c's TempDir, and closed with it.
func RunScenario(ctx context.Context, c realtime.Config, sc spec.Scenario, opts Options) (*Result, error) {
	if err := Check(c, sc, opts.Modes...); err != nil {
		return nil, err
	}
	s, err := realtime.Open(ctx, c, sc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.OpenContenders(ctx, opts.Modes); err != nil {
		return nil, err
	}
	r, err := New(s, opts)
	if err != nil {
		return nil, err
	}
	res, err := r.Run(ctx)
	return res, errors.Join(err, s.Close())
}

// Runner runs one scenario with its agents as processes.
type Runner struct {
	setup  *realtime.Setup
	opts   Options
	shares childConfig // what every child is told of the backend and the store
	h      history.Header
	start  time.Time
	ctx    context.Context // the run's, while it runs
	begun  chan struct{}   // closed once start is set: the processes are ready

	liveMu  sync.Mutex // one Live event at a time
	mu      sync.Mutex
	procs   []*proc
	stats   map[history.Mode]*ProcessStats
	reports map[history.Mode]*reported
	errs    []error
	wg      sync.WaitGroup // every process's reader, and the schedule
	timed   *realtime.TimedFaults
}

// New prepares a run of the setup's scenario.
func New(s *realtime.Setup, opts Options) (*Runner, error) {
	modes := opts.Modes
	if len(modes) == 0 {
		modes = registry.Modes()
	}
	if err := Check(s.Config, s.Scenario, modes...); err != nil {
		return nil, err
	}
	if opts.Contenders == nil {
		opts.Contenders = s.Contenders
	}
	if err := s.Scenario.Validate(); err != nil {
		return nil, err
	}
	shares, err := share(s)
	if err != nil {
		return nil, err
	}
	r := &Runner{setup: s, opts: opts, shares: shares, stats: make(map[history.Mode]*ProcessStats), reports: make(map[history.Mode]*reported)}
	r.h = registry.Header(s.Scenario, modes)
	r.h.Backend = s.Backend.Name()
	if err := r.describeContenders(); err != nil {
		return nil, err
	}
	for _, m := range r.h.Modes {
		r.stats[m] = &ProcessStats{}
		r.reports[m] = &reported{observed: r.h.Contender(m).Generations == realtime.GenerationsObserved}
	}
	// The scenario's crashes are kills like any other, at the scenario's
	// instants (already on the run's time scale).
	r.opts.Kills = append(slices.Clone(opts.Kills), s.Scenario.Crashes...)
	for _, k := range r.opts.Kills {
		if !slices.Contains(r.h.Agents, k.Agent) {
			return nil, fmt.Errorf("procdriver: kill of %q, who is not one of the run's agents", k.Agent)
		}
	}
	if len(r.opts.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("procdriver: the program to run agents with: %w", err)
		}
		r.opts.Command = []string{exe, ChildArg}
	}
	return r, nil
}

// describeContenders checks that every mode that is a library's
// contender has its lock, which another process can reach, and has the
// header say what each is, as its adapter does (how its generations are
// numbered, ...).
func (r *Runner) describeContenders() error {
	for m := range r.opts.Contenders {
		if !slices.Contains(r.h.Modes, m) {
			return fmt.Errorf("procdriver: a contender for mode %s, which the run does not run", m)
		}
	}
	for i, hc := range r.h.Contenders {
		c, ok := r.opts.Contenders[hc.Name]
		if !ok {
			return fmt.Errorf("%w %s: open it with the setup (realtime.Setup.OpenContenders) or give it in Options.Contenders", ErrNoContender, hc.Name)
		}
		if _, err := realtime.Share(string(hc.Name), c); err != nil {
			return fmt.Errorf("%w: %w", ErrCannotPlay, err)
		}
		info := c.Info
		info.Name = hc.Name
		r.h.Contenders[i] = info
	}
	return nil
}

// Header is the history header of the run.
func (r *Runner) Header() history.Header { return r.h }

func (r *Runner) now() time.Duration { return time.Since(r.start) }

// Run runs the scenario for its duration, or until ctx ends, and returns
// the verdict. Every process it started has ended when it returns.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	if r.begun != nil {
		return nil, errors.New("procdriver: a Runner runs once")
	}
	r.begun = make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.ctx = runCtx
	defer r.killAll()
	resources, err := r.openResources(runCtx)
	if err == nil {
		err = r.startAll()
	}
	if err == nil {
		err = r.awaitReady()
	}
	var wall time.Duration
	if err == nil {
		// The run's time starts once every process is ready.
		r.start = time.Now()
		close(r.begun)
		end := time.AfterFunc(r.setup.Scenario.Duration, cancel)
		defer end.Stop()
		r.schedule()
		<-runCtx.Done()
		wall = r.now()
	} else {
		cancel()
		r.killAll()
	}
	r.finish(ctx)
	r.wg.Wait()
	if err := r.timed.Err(); err != nil {
		r.fail(err)
	}
	res, recordErr := r.result(resources, wall)
	switch {
	case err != nil:
		return res, err
	case recordErr != nil:
		return res, recordErr
	}
	return res, ctx.Err()
}

// awaitReady waits until every process has opened what its agent needs
// (it wrote its header), and fails if one ends first or takes a minute.
func (r *Runner) awaitReady() error {
	limit := time.NewTimer(time.Minute)
	defer limit.Stop()
	for _, p := range r.procList() {
		select {
		case <-p.ready:
		case <-p.exited:
			return fmt.Errorf("procdriver: %s ended before it was ready%s", p.name(), p.stderr.String())
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-limit.C:
			return fmt.Errorf("procdriver: %s was not ready within a minute", p.name())
		}
	}
	return nil
}

// openResources opens every mode's resources in the parent (their tables
// made before any child writes), to read their records back after.
func (r *Runner) openResources(ctx context.Context) (map[history.Mode][]realtime.Resource, error) {
	out := make(map[history.Mode][]realtime.Resource)
	for _, m := range r.h.Modes {
		for _, name := range r.h.Resources {
			res, err := r.setup.Store.Resource(ctx, m, name, r.now)
			if err != nil {
				return out, fmt.Errorf("procdriver: resource %s (%s): %w", name, m, err)
			}
			out[m] = append(out[m], res)
		}
	}
	return out, nil
}

func (r *Runner) startAll() error {
	scripted := make(map[string]bool)
	for _, act := range r.setup.Scenario.Script {
		scripted[act.Agent] = true
	}
	for _, m := range r.h.Modes {
		for i, name := range r.h.Agents {
			if err := r.startProc(m, i, 0, scripted[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// schedule plays the crashes, the actions and the faults of the backend's
// servers (the scenario's faults list, as the in-process runner plays
// them) at their instants.
func (r *Runner) schedule() {
	r.timed = realtime.PlayFaults(r.ctx, &r.wg, r.setup.Backend, r.setup.Scenario.Faults, r.now, r.recordFault)
	for _, act := range r.opts.Actions {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if sleep(r.ctx, act.At-r.now()) != nil {
				return
			}
			if err := act.Do(r.ctx); err != nil && r.ctx.Err() == nil {
				r.fail(fmt.Errorf("procdriver: %s at %v: %w", act.Name, act.At, err))
			}
		}()
	}
	for _, k := range r.opts.Kills {
		ai := slices.Index(r.h.Agents, k.Agent)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if sleep(r.ctx, k.At-r.now()) != nil {
				return
			}
			lives := r.kill(ai)
			crash := spec.FaultCrash.Began(ai, "", k.Restart)
			if k.Restart <= 0 {
				crash.Dur = max(r.setup.Scenario.Duration-k.At, time.Nanosecond) // down to the run's end
			}
			r.recordFault(crash)
			if k.Restart <= 0 || sleep(r.ctx, k.Restart) != nil {
				return
			}
			r.recordFault(crash.Ended())
			for m, life := range lives {
				if err := r.startProc(m, ai, life+1, false); err != nil {
					r.fail(err)
				}
			}
		}()
	}
}

// finish waits for the children to end on their own at the run's end, and
// kills those that do not (or all of them at once if ctx has ended).
func (r *Runner) finish(ctx context.Context) {
	grace := time.NewTimer(2*r.setup.Scenario.TTL + 5*time.Second)
	defer grace.Stop()
	for _, p := range r.procList() {
		select {
		case <-p.exited:
		case <-ctx.Done():
			r.killAll()
		case <-grace.C:
			r.killAll()
		}
	}
}

func (r *Runner) procList() []*proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.procs)
}

func (r *Runner) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// result reads back the resources' records, builds each mode's history,
// has the checker judge it, and hands it to the subscribers.
func (r *Runner) result(resources map[history.Mode][]realtime.Resource, wall time.Duration) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(10*r.setup.Scenario.TTL, 10*time.Second))
	defer cancel()
	hr := history.NewResult(&r.h)
	res := &Result{Result: &realtime.Result{Result: hr, Backend: r.setup.Backend.Name(), Store: r.setup.Store.Name(), Wall: wall},
		Agents: registry.Process, Processes: make(map[history.Mode]ProcessStats)}
	errs := r.errs
	for _, m := range r.h.Modes {
		rep := r.reports[m]
		records := make([][]realtime.Landing, len(resources[m]))
		for ri, rs := range resources[m] {
			var err error
			if records[ri], err = rs.Landings(ctx); err != nil {
				errs = append(errs, fmt.Errorf("procdriver: reading back the writes of %s (%s): %w", r.h.Resources[ri], m, err))
			}
		}
		landed, err := rep.landings(records, r.h.Resources, wall)
		if err != nil {
			errs = append(errs, err)
		}
		checker := history.NewChecker(&r.h, m)
		for _, e := range rep.history(landed, &r.h) {
			if e.Kind == history.RequestSent {
				res.Faults.Calls++
			}
			checker.Add(&e)
			for _, s := range r.opts.Subscribers {
				s.Event(e)
			}
		}
		hr.Add(checker.Report())
		res.Processes[m] = *r.stats[m]
	}
	return res, errors.Join(errs...)
}

// childConfig is what the child of agent ai in mode m, in its life-th
// process, is told.
func (r *Runner) childConfig(m history.Mode, ai, life int, scripted bool) childConfig {
	c := r.shares
	c.Header, c.Scenario, c.Mode, c.Agent, c.Life, c.Scripted = r.h, r.setup.Scenario, m, ai, life, scripted
	if ct, ok := r.opts.Contenders[m]; ok {
		c.ContenderShare = ct.Share
	}
	return c
}

// share is what every child is told of the run's backend and store.
func share(s *realtime.Setup) (childConfig, error) {
	c := childConfig{Backend: s.Config.Backend, Store: s.Store.Name()}
	var err error
	if c.BackendShare, err = realtime.Share(c.Backend, s.Backend); err != nil {
		return c, fmt.Errorf("%w: %w", ErrCannotPlay, err)
	}
	if c.StoreShare, err = realtime.Share(c.Store, s.Store); err != nil {
		return c, fmt.Errorf("%w: %w", ErrCannotPlay, err)
	}
	return c, nil
}

func encodeConfig(c childConfig) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("procdriver: child config: %w", err)
	}
	return append(b, '\n'), nil
}
