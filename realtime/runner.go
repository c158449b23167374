package realtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// ErrFloorsLost refuses a run whose coordinator restart loses its state
// while the resources are etcd gates: a restart that loses etcd's state
// starts a fresh etcd, which would take the gates' floors with it, and the
// run would judge a gate that forgot what it admitted.
var ErrFloorsLost = errors.New("realtime: a restart that loses etcd's state would take the etcd gates' floors with it")

// Options configures a Runner.
type Options struct {
	// Modes to run (default both). They run at the same time, side by
	// side on the same fault choices, each on its own coordinator and
	// resources.
	Modes []history.Mode
	// Backend gives the coordinators (default: a new Memory).
	Backend Backend
	// Contenders give the locks of the modes they name in place of
	// Backend's coordinators (a library run unmodified, each on a server
	// of its own), so that one run compares them on the same faults.
	// Backend restarts none of them; the caller closes them.
	Contenders map[history.Mode]*Contender
	// Store gives the resources (default: MemoryStore).
	Store Store
	// Subscribers receive every event, in history order, one at a time,
	// once the run is over and the resources' records are read back: they
	// must not call back into the runner.
	Subscribers []history.Subscriber
	// live hear every event as it happens (Live's dashboard fold).
	live []history.Subscriber
	// CallTimeout bounds each call to the coordinator and each write; 0
	// means the scenario's TTL (a reply later than a whole TTL is of no
	// use to the holder anyway).
	CallTimeout time.Duration
	// Grace is how long after its duration the run waits for calls to a
	// coordinator still under way (DefaultGrace for 0); then it ends
	// without them (NeverReturnedError).
	Grace time.Duration
	// Settle, if set, is called after each timer the run fires, before the
	// next (timers.go): in a testing/synctest bubble, synctest.Wait, so
	// that what one timer sets off runs until it waits before the next
	// timer of the same virtual instant fires, and a seed gives one run.
	// It must return once the run's other goroutines wait.
	Settle func()
}

// Result is a real-time run's verdict: the checker's Result on the
// history the run emitted, with what only a real run has.
type Result struct {
	*history.Result
	// Backend and Store name where the leases and the writes lived.
	Backend string `json:"backend"`
	Store   string `json:"resource_store"`
	// Wall is how long the run took on the wall clock.
	Wall time.Duration `json:"wall_ns"`
	// Faults is what the fault layer did, over every agent and mode.
	// The faults of the backend's servers (the scenario's faults list) are
	// the history's: each one's fault_began and fault_ended.
	Faults FaultStats `json:"faults"`
}

// Runner runs one scenario in real time: agents are goroutines on real
// clocks, calling a Backend's coordinator through a fault layer and
// writing to a Store's resources. Everything they do is an event of one
// history, judged by history's checker, exactly as the simulator's is.
type Runner struct {
	sc      spec.Scenario
	h       history.Header
	backend Backend
	locks   map[history.Mode]*Contender // the modes run on a contender's lock (Options.Contenders)
	store   Store
	subs    []history.Subscriber
	timeout time.Duration
	grace   time.Duration
	settle  func()  // Options.Settle
	calls   calls   // the calls to the coordinators under way
	timers  *timers // every timed thing the run does, fired in one order
	start   time.Time

	mu        sync.Mutex // every event is stamped and kept under it
	checkers  map[history.Mode]*history.Checker
	emitted   map[history.Mode][]history.Event // in the order they happened, until assemble
	live      []history.Subscriber             // hear each event as it happens (a dashboard)
	stopped   bool
	abandoned error         // Abandon's, once it ended the run
	last      time.Duration // the instant of the latest event stamped
	wall      time.Duration // the run's length, once stopped
	timed     *TimedFaults  // the scenario's faults list, once scheduled

	// restarting is held by a coordinator restart, and read-held by each
	// call to a coordinator the restart concerns (holdOffRestarts) from
	// its send to its record: a grant is then
	// recorded under the incarnation that made it, never under the one
	// before a restart that had already brought the new coordinator up.
	// Its waiters wait on channels (rwGate): a call held across it may wait
	// on a bubble's virtual clock.
	restarting *rwGate

	worlds []*world
	began  bool            // Run was called, under mu
	runCtx context.Context // the run's context while it runs, under mu
	wg     sync.WaitGroup  // every goroutine of the run: agents, timed faults, pushes (started by agents)
	// extra counts goroutines started from outside (a live restart). They
	// are added under mu while not stopped, and waited for once stopped is
	// set, so no Add can race the Wait.
	extra sync.WaitGroup
}

// New prepares a real-time run of sc. It validates sc and opens nothing:
// Run does.
func New(sc spec.Scenario, opts Options) (*Runner, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	modes := opts.Modes
	if len(modes) == 0 {
		modes = registry.Modes()
	}
	if len(sc.Interventions) > 0 {
		return nil, fmt.Errorf("%w: recorded interventions replay only in the simulator", ErrUnmappable)
	}
	if opts.Store != nil && floorsLostWithBackend(opts.Store) {
		for i, rs := range sc.Restarts {
			if !rs.Persist {
				return nil, fmt.Errorf("%w: restarts[%d] loses the coordinator's state", ErrFloorsLost, i)
			}
		}
	}
	r := &Runner{sc: sc, backend: opts.Backend, locks: opts.Contenders, store: opts.Store, subs: opts.Subscribers, timeout: opts.CallTimeout,
		checkers: make(map[history.Mode]*history.Checker), emitted: make(map[history.Mode][]history.Event), live: opts.live,
		restarting: newRWGate(), timers: newTimers(), settle: opts.Settle}
	if r.backend == nil {
		r.backend = NewMemory()
	}
	if r.store == nil {
		r.store = MemoryStore{}
	}
	if r.timeout <= 0 {
		r.timeout = sc.TTL
	}
	if r.grace = opts.Grace; r.grace <= 0 {
		r.grace = DefaultGrace
	}
	// What the store and agents as goroutines cannot play is refused
	// here too, for a caller that did not go through Config.Check.
	entries := []*registry.Entry{registry.Must(registry.Drivers, registry.InProcess)}
	if st, ok := registry.Lookup(registry.Stores, r.store.Name()); ok {
		entries = append(entries, st)
	}
	if err := registry.CanPlayAll(sc, entries...); err != nil {
		return nil, fmt.Errorf("realtime: %w", err)
	}
	r.h = registry.Header(sc, modes)
	if err := checkLocks(sc, r.backend, r.h.Modes, r.locks); err != nil {
		return nil, err
	}
	r.h.Backend = r.backend.Name()
	if c, ok := r.backend.(*Contender); ok {
		r.h.Contenders = c.contenders(r.h.Modes)
	}
	for m, c := range r.locks {
		if !slices.Contains(r.h.Modes, m) {
			return nil, fmt.Errorf("realtime: a contender for mode %s, which the run does not run", m)
		}
		r.h.Contenders = slices.DeleteFunc(r.h.Contenders, func(hc history.Contender) bool { return hc.Name == m })
		r.h.Contenders = append(r.h.Contenders, c.contenders([]history.Mode{m})...)
	}
	slices.SortStableFunc(r.h.Contenders, func(a, b history.Contender) int {
		return slices.Index(r.h.Modes, a.Name) - slices.Index(r.h.Modes, b.Name)
	})
	for _, m := range r.h.Modes {
		r.checkers[m] = history.NewChecker(&r.h, m)
	}
	return r, nil
}

// Header is the history header of the run.
func (r *Runner) Header() history.Header { return r.h }

// Run runs the scenario for its duration of wall time, or until ctx ends:
// then every agent stops where it is, and Run returns what ran with
// ctx.Err(). It does not close the backend or the store. A call to a
// coordinator (a contender's lock) still under way a grace after that
// (Options.Grace) is not waited for: Run returns what was recorded until
// then, each such call a library error of its mode, with a
// *NeverReturnedError (see ErrNeverReturned).
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	if ctx == nil {
		return nil, errors.New("realtime: Run with a nil context")
	}
	r.mu.Lock()
	if r.began {
		r.mu.Unlock()
		return nil, errors.New("realtime: a Runner runs once")
	}
	r.began = true
	r.start = time.Now()
	r.mu.Unlock()
	wg := &r.wg
	// The coordinators and resources open under ctx, not under the run's
	// duration: a store slow to open (tables to create on a loaded
	// machine) must not eat the scenario's time, which starts once all
	// are open.
	var openErr error
	for _, m := range r.h.Modes {
		w, err := r.open(ctx, m)
		if err != nil {
			openErr = err
			break
		}
		r.worlds = append(r.worlds, w)
	}
	runCtx, cancel := context.WithTimeout(ctx, r.sc.Duration)
	defer cancel()
	r.mu.Lock()
	r.runCtx = runCtx
	r.mu.Unlock()
	if openErr == nil {
		// The run lasts its duration, whatever its agents do; and so the
		// count of its goroutines is above zero whenever one is added.
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.fire(runCtx, r.settle)
		}()
		r.schedule(runCtx, wg)
		for _, w := range r.worlds {
			for _, d := range w.agents {
				d.start(runCtx)
			}
			if err := w.startForgers(); err != nil {
				openErr = err
			}
		}
	}
	stuck := r.waitCalls(wg, runCtx.Done())
	r.mu.Lock()
	if r.stopped {
		// Abandoned: what was recorded is the history Abandon made.
		r.mu.Unlock()
		return r.result(), r.abandoned
	}
	r.recordStuckLocked(stuck, false)
	r.stopped = true
	r.wall = time.Since(r.start)
	r.mu.Unlock()
	if stuck == nil {
		// A live restart waits for the calls under way: with one stuck,
		// it never ends.
		r.extra.Wait()
	}
	recordErr := r.assemble()
	res := r.result()
	switch {
	case stuck != nil:
		return res, errors.Join(&NeverReturnedError{Scenario: r.sc.Name, Seed: r.sc.Seed, Grace: r.grace, Calls: stuck}, recordErr)
	case openErr != nil && ctx.Err() != nil:
		// Interrupted while opening: the open failed because of it (a
		// dial cut short reports its own error, not the context's).
		return res, fmt.Errorf("%w while opening: %v", ctx.Err(), openErr)
	case openErr != nil:
		return res, openErr
	case recordErr != nil:
		return res, recordErr
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	return res, r.timed.Err()
}

// result is the checker's verdict on the history so far.
func (r *Runner) result() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	hr := history.NewResult(&r.h)
	for _, m := range r.h.Modes {
		hr.Add(r.checkers[m].Report())
	}
	res := &Result{Result: hr, Backend: r.backend.Name(), Store: r.store.Name(), Wall: r.wall}
	for _, w := range r.worlds {
		for _, d := range w.agents {
			res.Faults = res.Faults.Add(d.stats.stats())
		}
	}
	return res
}

// Elapsed is true time since the run began: 0 before Run, and the run's
// length once it ended.
func (r *Runner) Elapsed() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.start.IsZero():
		return 0
	case r.stopped:
		return r.wall
	}
	return time.Since(r.start)
}

// Done reports whether the run has ended.
func (r *Runner) Done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// now is true time since the run began.
func (r *Runner) now() time.Duration { return time.Since(r.start) }

// over reports whether the run has ended (or not begun).
func (r *Runner) over() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped || r.runCtx == nil || r.runCtx.Err() != nil
}

// spawn runs f on a goroutine of the run, with the run's context, unless
// the run is over. It is called from the run's goroutines only (or before
// they wait), so the count it adds to is above zero.
func (r *Runner) spawn(f func(ctx context.Context)) {
	r.mu.Lock()
	ctx := r.runCtx
	if r.stopped || ctx == nil || ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		f(ctx)
	}()
}

// emit stamps e with the mode, the instant and its sequence number, and
// adds it to the history. Events emitted after the run stopped are
// dropped: the history ends where the run did.
func (r *Runner) emit(mode history.Mode, e history.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(mode, e)
}

func (r *Runner) emitLocked(mode history.Mode, e history.Event) { r.emitAtLocked(mode, e, r.now()) }

// emitAtLocked is emitLocked for an event that happened at true instant
// at, which the system under test stamped.
func (r *Runner) emitAtLocked(mode history.Mode, e history.Event, at time.Duration) {
	if r.stopped {
		return
	}
	e.Mode, e.At = mode, at
	r.last = max(r.last, at)
	r.emitted[mode] = append(r.emitted[mode], e)
	e.Seq = uint64(len(r.emitted[mode]))
	for _, s := range r.live {
		s.Event(e)
	}
}

// emitLive hands e to the live subscribers only: a write's landing as its
// writer saw it return, for a dashboard; the history has it from the
// resource's record.
func (r *Runner) emitLive(mode history.Mode, e history.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	e.Mode, e.At = mode, r.now()
	for _, s := range r.live {
		s.Event(e)
	}
}

// schedule starts the run's timed faults: partitions, coordinator
// restarts and the faults list, the backend's servers' (TimedFaults).
func (r *Runner) schedule(ctx context.Context, wg *sync.WaitGroup) {
	at := func(d time.Duration, f func()) { r.after(d, -1, func(context.Context) { f() }) }
	for _, p := range r.sc.Partitions {
		ai := agentIndex(r.h.Agents, p.Agent)
		fault := spec.FaultPartition.Began(ai, "", p.To-p.From)
		at(p.From, func() {
			for _, w := range r.worlds {
				w.agents[ai].partitions.Add(1)
				r.emit(w.mode, fault)
			}
		})
		at(p.To, func() {
			for _, w := range r.worlds {
				w.agents[ai].partitions.Add(-1)
				r.emit(w.mode, fault.Ended())
			}
		})
	}
	for _, rs := range r.sc.Restarts {
		at(rs.At, func() { r.restart(ctx, rs.Persist) })
	}
	r.timed = PlayFaults(ctx, wg, r.backend, r.sc.Faults, r.now, r.recordFault)
}

// restart restarts the coordinators, and records it in every mode: as
// the coordinator's restart, or as its server's where the backend's
// restart keeps the leases (LeaseKeeper).
func (r *Runner) restart(ctx context.Context, persist bool) {
	r.restarting.Lock()
	defer r.restarting.Unlock()
	// The restart is dated from when it began, once every call to the old
	// coordinators was recorded: a fence the new ones reuse comes after it
	// in the history, and every fence the old ones minted before it.
	r.restartContenders(ctx, persist)
	began := r.now()
	if err := r.backend.Restart(ctx, persist); err != nil {
		if ctx.Err() == nil {
			for _, w := range r.worlds {
				r.emit(w.mode, history.Event{Kind: history.LibraryError, Agent: -1, Resource: -1, Other: -1,
					Detail: "coordinator restart: " + err.Error()})
			}
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	target, kept := "", false
	if lk, ok := r.backend.(LeaseKeeper); ok && persist {
		target, kept = lk.RestartKeepsLeases()
	}
	for _, w := range r.worlds {
		if w.backend != r.backend {
			continue // a contender's lock: not the lab's to restart (the registry refuses restarts of one)
		}
		if kept {
			// The server's, not the coordinator's: its leases live on.
			r.emitAtLocked(w.mode, serverRestarted(target, persist), began)
			continue
		}
		r.emitAtLocked(w.mode, spec.RestartBegan(persist), began)
		e := history.Event{Kind: history.CoordinatorRestarted, Agent: -1, Resource: -1, Other: -1,
			Outcome: history.OutcomeCounterPersisted, Fence: w.maxFence}
		if !persist {
			// Fences start over, and every lease the old coordinator
			// granted is forgotten: a new incarnation.
			w.incarnation++
			w.maxFence = 0
			e.Fence, e.Outcome = 0, history.OutcomeCounterLost
		}
		e.Incarnation = w.incarnation
		r.emitAtLocked(w.mode, e, began)
	}
}

// holdOffRestarts read-holds restarting for a call to w's coordinator, if
// a restart concerns it, and returns what lets go. A contender's lock
// that no restart touches (beside the lab's coordinator, with no
// OnRestart) takes no part: a call of its that never returns then holds up
// no restart, and through a restart waiting for it no call of another
// mode.
func (w *world) holdOffRestarts() (release func()) {
	if c, ok := w.backend.(*Contender); ok && w.backend != w.r.backend && c.OnRestart == nil {
		return func() {}
	}
	w.r.restarting.RLock()
	return w.r.restarting.RUnlock
}

// restartContenders plays a restart on the contenders that say how
// (redlock restarts one of its servers), each recorded in its own mode as
// a restart fault on what it restarted: a library's server, not the lab's
// coordinator, so no coordinator_restarted unless the restart ended every
// lease (Contender.RestartEndsLeases); the registry refuses restarts to
// the contenders that cannot play them. Called with restarting held.
func (r *Runner) restartContenders(ctx context.Context, persist bool) {
	for _, w := range r.worlds {
		c, ok := w.backend.(*Contender)
		if !ok || w.backend == r.backend || c.OnRestart == nil {
			continue
		}
		began := r.now()
		err := c.Restart(ctx, persist)
		target := c.RestartTarget
		if target == "" {
			target = string(c.Info.Name) + "'s server"
		}
		e := serverRestarted(target, persist)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			e = history.Event{Kind: history.LibraryError, Agent: -1, Resource: -1, Other: -1, Detail: "contender restart: " + err.Error()}
		}
		r.mu.Lock()
		r.emitAtLocked(w.mode, e, began)
		if err == nil && c.RestartEndsLeases {
			// The leases ended with the restart; the lock's generations
			// go on (none is reissued).
			r.emitAtLocked(w.mode, history.Event{Kind: history.CoordinatorRestarted, Agent: -1, Resource: -1, Other: -1,
				Outcome: history.OutcomeCounterPersisted, Fence: w.maxFence, Incarnation: w.incarnation}, began)
		}
		r.mu.Unlock()
	}
}

// serverRestarted is the restart fault of a server, target, that kept
// its data or lost it.
func serverRestarted(target string, persist bool) history.Event {
	e := spec.FaultRestart.Began(-1, target, 0)
	e.Detail = map[bool]string{false: "its data lost", true: "its data kept"}[persist]
	return e
}

// recordFault records fault event e in every mode, now.
func (r *Runner) recordFault(e history.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordFaultLocked(e)
}

// recordFaultLocked is recordFault with r.mu held: one instant in every
// mode, since it is one fault.
func (r *Runner) recordFaultLocked(e history.Event) {
	now := r.now()
	for _, w := range r.worlds {
		r.emitAtLocked(w.mode, e, now)
	}
}

func agentIndex(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// world is one mode's side of the run: its coordinator, its resources and
// its agents, and what the history knows of each resource's lease
// generations (guarded by the runner's mu).
type world struct {
	r    *Runner
	mode history.Mode
	// discipline is how the mode's contender writes (the header's).
	discipline history.Discipline
	backend    Backend                   // the runner's, or the mode's contender
	svc        func() leasefence.Service // the backend's coordinator now
	side       *coordSide                // what the agents' fault layers call
	clock      *coordClock

	resources []Resource
	writes    writes // the writes sent to the resources, by id
	agents    []*driver

	gens        []genState // per resource: the newest generation the history has seen
	incarnation int32
	maxFence    leasefence.Fence

	pushMu sync.Mutex
	pushes *agent.Pushes

	genuine genuine // the newest proof the coordinator granted, per resource (forger.go)
}

func (r *Runner) open(ctx context.Context, mode history.Mode) (*world, error) {
	sc := &r.sc
	w := &world{r: r, mode: mode, discipline: r.h.Contender(mode).Discipline, clock: newCoordClock(r.start, sc.Clocks.CoordinatorDriftPPM), pushes: agent.NewPushes(sc)}
	w.backend = r.backend
	if c, ok := r.locks[mode]; ok {
		w.backend = c
	}
	svc, err := OpenCoordinator(ctx, w.backend, mode, w.clock.Clock, *sc)
	if err != nil {
		return nil, fmt.Errorf("realtime: %s coordinator (%s): %w", w.backend.Name(), mode, err)
	}
	w.svc = svc
	w.side = &coordSide{w: w}
	w.resources = make([]Resource, sc.Resources)
	w.gens = make([]genState, sc.Resources)
	for i, name := range r.h.Resources {
		if w.resources[i], err = r.store.Resource(ctx, mode, name, r.now); err != nil {
			return nil, fmt.Errorf("realtime: %s resource %s (%s): %w", r.store.Name(), name, mode, err)
		}
	}
	scripted := make(map[string]bool)
	for _, act := range sc.Script {
		scripted[act.Agent] = true
	}
	for i, name := range r.h.Agents {
		d, err := newDriver(w, i, scripted[name])
		if err != nil {
			return nil, err
		}
		w.agents = append(w.agents, d)
	}
	return w, nil
}
