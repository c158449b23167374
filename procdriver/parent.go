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
	"github.com/leasefence/lab/spec"
)

// AgentsProcess is how a run's agents ran when each was a process of its
// own, as reports say it; AgentsInProcess when they were goroutines.
const (
	AgentsProcess   = "process"
	AgentsInProcess = "in-process"
)

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
	// processes, coordinator and resources.
	Modes []history.Mode
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

// Check reports why agents as processes cannot run sc with c, before
// anything starts: the coordinator must be etcd (the in-memory one lives
// in one process) and the gates shared (SQLite or etcd); the faults they
// play are stalls, crashes, drift and network delays, the rest is the
// in-process runner's. The error wraps ErrCannotPlay.
func Check(c realtime.Config, sc spec.Scenario) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCannotPlay, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Backend != realtime.BackendEtcd:
		return bad("the coordinator must be reachable from every process: use backend etcd")
	case c.Resource != "" && c.Resource != realtime.StoreSQLite && c.Resource != realtime.StoreEtcd:
		return bad("the gates must be shared by every process: use resource sqlite or etcd")
	case len(sc.Partitions) > 0 || len(sc.Restarts) > 0:
		return bad("partitions and coordinator restarts are played by the in-process runner only")
	case sc.Network.DropRequests > 0 || sc.Network.DropReplies > 0 || sc.Network.Duplicate > 0:
		return bad("dropped and duplicated messages are played by the in-process runner only")
	case sc.Push.Enabled:
		return bad("the gate push is played by the in-process runner only")
	}
	return nil
}

// RunScenario runs sc with c's backend and store, its agents as processes,
// on a setup opened for it and closed after: the whole run in one call.
func RunScenario(ctx context.Context, c realtime.Config, sc spec.Scenario, opts Options) (*Result, error) {
	if err := Check(c, sc); err != nil {
		return nil, err
	}
	s, err := realtime.Open(ctx, c, sc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r, err := New(s, opts)
	if err != nil {
		return nil, err
	}
	res, err := r.Run(ctx)
	return res, errors.Join(err, s.Close())
}

// Runner runs one scenario with its agents as processes.
type Runner struct {
	setup *realtime.Setup
	opts  Options
	h     history.Header
	start time.Time
	ctx   context.Context // the run's, while it runs
	begun chan struct{}   // closed once start is set: the processes are ready

	liveMu  sync.Mutex // one Live event at a time
	mu      sync.Mutex
	procs   []*proc
	stats   map[history.Mode]*ProcessStats
	reports map[history.Mode]*reported
	errs    []error
	wg      sync.WaitGroup // every process's reader, and the schedule
}

// New prepares a run of the setup's scenario.
func New(s *realtime.Setup, opts Options) (*Runner, error) {
	if err := Check(s.Config, s.Scenario); err != nil {
		return nil, err
	}
	if err := s.Scenario.Validate(); err != nil {
		return nil, err
	}
	modes := opts.Modes
	if len(modes) == 0 {
		modes = []history.Mode{history.Naive, history.Fenced}
	}
	r := &Runner{setup: s, opts: opts, stats: make(map[history.Mode]*ProcessStats), reports: make(map[history.Mode]*reported)}
	r.h = s.Scenario.Header(modes)
	r.h.Backend = s.Backend.Name()
	for _, m := range r.h.Modes {
		r.stats[m], r.reports[m] = &ProcessStats{}, &reported{}
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

// schedule plays the crashes and the actions at their instants.
func (r *Runner) schedule() {
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
			if k.Restart <= 0 || sleep(r.ctx, k.Restart) != nil {
				return
			}
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
		Agents: AgentsProcess, Processes: make(map[history.Mode]ProcessStats)}
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
		for _, e := range rep.history(landed, len(r.h.Resources)) {
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
	c := childConfig{Header: r.h, Scenario: r.setup.Scenario, Mode: m, Agent: ai, Life: life, Scripted: scripted,
		Store: r.setup.Store.Name()}
	if e, ok := r.setup.Backend.(*realtime.Etcd); ok {
		c.Endpoints, c.Prefix = e.Endpoints(), e.Prefix()
	}
	if st, ok := r.setup.Store.(*realtime.SQLiteStore); ok {
		c.SQLiteDir = st.Dir()
	}
	return c
}

func encodeConfig(c childConfig) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("procdriver: child config: %w", err)
	}
	return append(b, '\n'), nil
}
