package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/leasefence/lab/fixtures"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// backendSim is the deterministic simulator, the default backend.
const backendSim = registry.Sim

// backendFlags choose where a run's leases and writes live: the simulator,
// or the real-time runner on the in-memory coordinator or on etcd.
type backendFlags struct {
	backend, resource string
	backendGiven      bool   // --backend was on the command line
	agentsGiven       bool   // --agents-as was
	agentsSpelled     string // "--agents" when how they run came as --agents process; else ""
	etcdMembers       int
	etcdEndpoints     string
	// own are the settings of each backend (registry.Settings), by name: a
	// flag --<backend>-<key> for each field.
	own       map[string]any
	timeScale float64
	agents    string
}

// choices spells k's entries for a flag's help: "name (what it is)", one
// a line.
func choices(k *registry.Kind) string {
	var b strings.Builder
	for _, e := range registry.All(k) {
		fmt.Fprintf(&b, "\n  %s: %s", e.Name, e.Doc)
	}
	return b.String()
}

func (bf *backendFlags) register(fs *flag.FlagSet) {
	bf.backend = backendSim
	fs.Var(givenString{&bf.backend, &bf.backendGiven}, "backend", "where the leases live:"+choices(registry.Backends))
	fs.StringVar(&bf.resource, "resource", "", "real backends: where the gates live (default: the backend's own; http alone runs on --backend memory):"+
		choices(registry.Stores))
	fs.IntVar(&bf.etcdMembers, "etcd-members", 0, "--backend etcd: the embedded cluster's size (default 1, or the scenario's etcd.members); more than one runs each member as a process behind proxies")
	fs.StringVar(&bf.etcdEndpoints, "etcd-endpoints", "", "--backend etcd: use the existing cluster at `URL,...` (keys under a fresh prefix, removed after)")
	bf.own = make(map[string]any)
	for _, name := range registry.WithSettings() {
		st, _ := registry.Opener[registry.Settings](registry.Backends, name)
		bf.own[name] = st.New()
		for _, f := range registry.SettingFields(name, bf.own[name]) {
			settingFlag(fs, f)
		}
	}
	bf.agents = registry.Default(registry.Drivers).Name
	fs.Var(givenString{&bf.agents, &bf.agentsGiven}, "agents-as", "real backends: how the agents run:"+choices(registry.Drivers))
	fs.Float64Var(&bf.timeScale, "time-scale", 0, "real backends: stretch every time of the scenario by `K` (default 1 on memory; on etcd the smallest K that makes the TTL whole seconds)")
	if f := fs.Lookup("agents"); f != nil {
		f.Value = agentsValue{count: f.Value, bf: bf}
	}
}

// settingFlag registers f, a field of a backend's settings, as its flag.
func settingFlag(fs *flag.FlagSet, f registry.SettingField) {
	switch p := f.Value.Addr().Interface().(type) {
	case *string:
		fs.StringVar(p, f.Flag, "", f.Help)
	case *int:
		fs.IntVar(p, f.Flag, 0, f.Help)
	case *bool:
		fs.BoolVar(p, f.Flag, false, f.Help)
	case *time.Duration:
		fs.DurationVar(p, f.Flag, 0, f.Help)
	default:
		panic(fmt.Sprintf("lab: setting --%s: a %T, which no flag takes", f.Flag, p))
	}
}

// agentsValue is --agents, the scenario's count of agents, which also
// takes how they run: --agents process (or in-process) is --agents-as
// process, the spelling people reach for first.
type agentsValue struct {
	count flag.Value
	bf    *backendFlags
}

func (v agentsValue) String() string {
	if v.count == nil {
		return ""
	}
	return v.count.String()
}

func (v agentsValue) Set(s string) error {
	if _, ok := registry.Lookup(registry.Drivers, s); ok {
		v.bf.agents, v.bf.agentsGiven, v.bf.agentsSpelled = s, true, "--agents"
		return nil
	}
	if err := v.count.Set(s); err != nil {
		return fmt.Errorf("%w (or %s, as --agents-as takes it)", err, strings.Join(registry.Names(registry.Drivers), "|"))
	}
	return nil
}

// givenString is a string flag that records that it was on the command
// line: --backend (--resource http alone then chooses the in-memory
// coordinator) and --agents-as (a fixture's choice yields to them).
type givenString struct {
	s     *string
	given *bool
}

func (v givenString) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

func (v givenString) Set(s string) error {
	*v.s, *v.given = s, true
	return nil
}

// fromFixture makes a fixture's backend, resource and agents those of a
// run of its scenario wherever the command line chose none: lab run
// FIXTURE runs where lab fixtures would.
func (bf *backendFlags) fromFixture(fx *scenario.Fixture) {
	if !bf.backendGiven && fx.Backend != backendSim {
		bf.backend = fx.Backend
	}
	if !bf.real() {
		return // --backend sim: the simulator's resources and agents are its own
	}
	if bf.resource == "" {
		bf.resource = fx.Resource
	}
	bf.settingsFrom(fx.Settings)
	if d := registry.Must(registry.Drivers, fx.Agents); !bf.agentsGiven && d.Needs.Processes {
		bf.agents = d.Name
	}
}

// settingsFrom takes a fixture's settings of its backend wherever the
// command line gave none, each field alone, in settings of bf's own (a
// copy of the flags' shares none with them).
func (bf *backendFlags) settingsFrom(fixture map[string]any) {
	own := make(map[string]any, len(bf.own))
	for _, name := range registry.WithSettings() {
		st, _ := registry.Opener[registry.Settings](registry.Backends, name)
		c := st.New()
		if v, ok := bf.own[name]; ok {
			reflect.ValueOf(c).Elem().Set(reflect.ValueOf(v).Elem())
		}
		if fv, ok := fixture[name]; ok {
			from := registry.SettingFields(name, fv)
			for i, f := range registry.SettingFields(name, c) {
				if f.Value.IsZero() {
					f.Value.Set(from[i].Value)
				}
			}
		}
		own[name] = c
	}
	bf.own = own
}

// real reports whether the flags choose the real-time runner.
func (bf *backendFlags) real() bool { return !history.Simulated(bf.backend) }

// validate checks each flag's own value, before any combination: the
// first problem, one line naming the flag.
func (bf *backendFlags) validate() error {
	if err := registry.Choice(registry.Backends, bf.backend); bf.backend != "" && err != nil {
		return fmt.Errorf("--backend: %w", err)
	}
	if err := registry.Choice(registry.Stores, bf.resource); bf.resource != "" && err != nil {
		return fmt.Errorf("--resource: %w", err)
	}
	if bf.etcdMembers < 0 || bf.etcdMembers > realtime.MaxEtcdMembers {
		return fmt.Errorf("--etcd-members: must be in [1, %d], got %d", realtime.MaxEtcdMembers, bf.etcdMembers)
	}
	if bf.etcdEndpoints != "" {
		for _, ep := range strings.Split(bf.etcdEndpoints, ",") {
			if err := realtime.CheckEndpoint(ep); err != nil {
				return fmt.Errorf("--etcd-endpoints: %w", err)
			}
		}
	}
	// The settings only one backend reads are its adapter's to check.
	if err := realtime.CheckSettings(*bf.settings()); err != nil {
		var ce *realtime.ConfigError
		if errors.As(err, &ce) {
			return fmt.Errorf("--%s: %s", ce.Setting, ce.Problem)
		}
		return err
	}
	if err := registry.Choice(registry.Drivers, bf.agents); bf.agents != "" && err != nil {
		return fmt.Errorf("--agents-as: %w", err)
	}
	if math.IsNaN(bf.timeScale) || bf.timeScale < 0 || bf.timeScale > realtime.MaxTimeScale {
		return fmt.Errorf("--time-scale: must be in (0, %d], got %v", realtime.MaxTimeScale, bf.timeScale)
	}
	return nil
}

// config checks the flags against sc and returns the real-time runner's
// configuration; for the simulator, nil. Every problem is one line naming
// the flag.
func (bf *backendFlags) config(sc spec.Scenario) (*realtime.Config, error) {
	if err := bf.validate(); err != nil {
		return nil, err
	}
	if !bf.real() && bf.resource == registry.HTTP && !bf.backendGiven {
		// A server on a port is real by nature: --resource http alone
		// runs on the in-memory coordinator.
		flags := *bf
		flags.backend = registry.Memory
		return flags.config(sc)
	}
	if !bf.real() {
		other, otherBackend := bf.settings().OtherSettings()
		if err := registry.Must(registry.Backends, backendSim).CanPlay(sc); err != nil {
			return nil, fmt.Errorf("--backend: %w", err)
		}
		switch {
		case bf.resource != "":
			return nil, errors.New("--resource: the simulator keeps its resources in memory; --resource needs --backend memory or etcd")
		case bf.etcdMembers != 0:
			return nil, errors.New("--etcd-members: needs --backend etcd")
		case bf.etcdEndpoints != "":
			return nil, errors.New("--etcd-endpoints: needs --backend etcd")
		case other != "":
			return nil, fmt.Errorf("--%s: needs --backend %s", other, otherBackend)
		case bf.timeScale != 0:
			return nil, errors.New("--time-scale: the simulator runs on virtual time; --time-scale needs --backend memory or etcd")
		case bf.processes():
			return nil, fmt.Errorf("%s: the simulator's agents are its own; agents as processes need --backend %s", bf.agentsAs(),
				registry.OneOfNames(registry.Must(registry.Drivers, registry.Process).RunsOn))
		}
		return nil, nil
	}
	c := bf.settings()
	c.Backend, c.Resource, c.TimeScale = bf.backend, bf.resource, bf.timeScale
	if err := c.Check(sc); err != nil {
		var ce *realtime.ConfigError
		if !errors.As(err, &ce) {
			return nil, err
		}
		if ce.Setting == "scenario" {
			return nil, fmt.Errorf("%s cannot run on --backend %s: %s", sc.Name, bf.backend, ce.Problem)
		}
		return nil, fmt.Errorf("--%s: %s", ce.Setting, ce.Problem)
	}
	if d, ok := registry.Lookup(registry.Drivers, bf.agents); ok {
		if err := d.CanPlay(sc); err != nil && !d.Needs.Processes {
			return nil, fmt.Errorf("--agents-as: %w", err)
		}
	}
	d, err := realtime.DriverFor(bf.agents)
	if err != nil {
		return nil, fmt.Errorf("--agents-as: %w", err)
	}
	if d.Check != nil {
		if err := d.Check(*c, sc); err != nil {
			return nil, fmt.Errorf("%s: %s", bf.agentsAs(), strings.TrimPrefix(err.Error(), d.Refused.Error()+": "))
		}
	}
	return c, nil
}

// settings are the flags' backend settings, as a configuration names
// them.
func (bf *backendFlags) settings() *realtime.Config {
	c := &realtime.Config{EtcdMembers: bf.etcdMembers, Settings: bf.own}
	if bf.etcdEndpoints != "" {
		c.EtcdEndpoints = strings.Split(bf.etcdEndpoints, ",")
	}
	return c
}

// agentsAs names the choice of how the agents run for an error: as the
// command line spelled it and, when that was --agents process, as the
// --agents-as flag it stands for, whose help says what it takes.
func (bf *backendFlags) agentsAs() string {
	if bf.agentsSpelled != "" {
		return fmt.Sprintf("%s %s (--agents-as %s)", bf.agentsSpelled, bf.agents, bf.agents)
	}
	return "--agents-as " + bf.agents
}

// processes reports whether the flags run each agent as a process.
func (bf *backendFlags) processes() bool {
	d, ok := registry.Lookup(registry.Drivers, bf.agents)
	return ok && d.Needs.Processes
}

// realRun is the real-time side of a run: its setup, opened when the run
// starts, and what it reports beyond the checker's verdict.
type realRun struct {
	config realtime.Config
	setup  *realtime.Setup
	// agents names the driver that runs the agents (registry.Drivers),
	// and runner is its run.
	agents string
	runner realtime.AgentRun
	// onSetup is the app's (a test's hook).
	onSetup func(*realtime.Setup)
	// neverReturned: the run ended with a call to a lock still under way
	// (realtime.ErrNeverReturned).
	neverReturned bool
	// stopAtFirst ends the run at the first counterexample of a lock's
	// own safety, which watch spots in the events as they happen, by
	// cancel, the run's context's (agents in-process: stopAtFirstApplies).
	stopAtFirst bool
	watch       *realtime.LockWatch
	cancel      context.CancelFunc
}

// open starts the backend and prepares the runner, so that its header is
// known before the first event.
func (rr *realRun) open(ctx context.Context, sc spec.Scenario, modes []history.Mode, subs []history.Subscriber) error {
	s, err := realtime.Open(ctx, rr.config, sc)
	if err != nil {
		return err
	}
	rr.setup = s
	if err := s.OpenContenders(ctx, modes); err != nil {
		s.Close()
		return err
	}
	if rr.onSetup != nil {
		rr.onSetup(s)
	}
	r, err := rr.newRunner(s, realtime.RunOptions{Modes: modes, Subscribers: subs})
	if err != nil {
		s.Close()
		return err
	}
	rr.runner = r
	return nil
}

// newRunner prepares the run on s: the driver's, or with stopAtFirst the
// in-process runner with a watch on its events.
func (rr *realRun) newRunner(s *realtime.Setup, opts realtime.RunOptions) (realtime.AgentRun, error) {
	if rr.stopAtFirst {
		r, w, err := s.NewWatchedRunner(opts, func() { rr.cancel() })
		rr.watch = w
		return r, err
	}
	d, err := realtime.DriverFor(rr.agents)
	if err != nil {
		return nil, err
	}
	return d.New(s, opts)
}

// header is the history header of the run.
func (rr *realRun) header() history.Header {
	return rr.runner.Header()
}

// run runs the scenario on the runner open made. A run stopped at its
// first counterexample (stopped) returns no error: the record up to then
// is judged.
func (rr *realRun) run(ctx context.Context) (*realtime.Result, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	rr.cancel = cancel
	res, err := rr.runner.Run(runCtx)
	rr.neverReturned = errors.Is(err, realtime.ErrNeverReturned)
	if _, stopped := rr.stopped(); stopped && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	return res, err
}

// stopped returns the mode whose lock finding stopped the run, if
// --stop-at-first did (none for the simulator's run, a nil rr).
func (rr *realRun) stopped() (history.Mode, bool) {
	if rr == nil {
		return "", false
	}
	return rr.watch.Stopped()
}

// closeAfterStuck is how long closing a run's setup may take once a call
// to a lock never returned: the grace again. A library's Close can wait for
// that very call (a client that drains its requests, a session that
// waits for its pending reply), which never comes.
const closeAfterStuck = realtime.DefaultGrace

// close closes the run's setup: its store, backend and contenders' locks
// and servers. After a call that never returned it waits at most limit,
// then says so on w and leaves the close where it is blocked: the servers
// the run started end with this process, and their directories are
// removed by the next run (internal/scratch).
func (rr *realRun) close(w io.Writer, limit time.Duration) {
	done := make(chan error, 1) // buffered: a close that ends late leaves nothing waiting
	go func() { done <- rr.setup.Close() }()
	var expired <-chan time.Time
	if rr.neverReturned {
		expired = time.After(limit)
	}
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(w, "lab run: --backend %s: %v\n", rr.config.Backend, err)
		}
	case <-expired:
		fmt.Fprintf(w, "lab run: --backend %s: closing the locks and servers did not finish %s after a call that never returned (a Close that waits for that call); exiting without it\n",
			rr.config.Backend, history.FormatDuration(limit))
	}
}

// figures are what the run reports of itself beside the checker's
// verdict.
func (rr *realRun) figures(res *realtime.Result) *report.RealFigures {
	f := res.Faults
	var stats map[history.Mode]procdriver.ProcessStats
	if p, ok := rr.runner.(processCounter); ok {
		stats = p.Processes()
	}
	return &report.RealFigures{Where: rr.setup.Describe(), Resource: res.Store, WallMS: res.Wall.Milliseconds(),
		TimeScale: rr.setup.Scale, Faults: report.FaultCounts{Calls: f.Calls, RequestsDropped: f.RequestsDropped,
			Partitioned: f.Partitioned, Duplicated: f.Duplicated, RepliesDropped: f.RepliesDropped},
		Agents: rr.agents, Processes: processCounts(stats)}
}

// processCounter is a driver's run whose agents were processes: what
// each mode's went through.
type processCounter interface {
	Processes() map[history.Mode]procdriver.ProcessStats
}

// processCounts are the report's counts of what the processes went
// through, by mode; nil when the agents were not processes.
func processCounts(stats map[history.Mode]procdriver.ProcessStats) map[history.Mode]report.ProcessCounts {
	if stats == nil {
		return nil
	}
	out := make(map[history.Mode]report.ProcessCounts, len(stats))
	for m, s := range stats {
		out[m] = report.ProcessCounts{Started: s.Started, Paused: s.Paused, Killed: s.Killed}
	}
	return out
}

// fixtureRunner is how lab fixtures runs a fixture on a real backend: the
// flags' configuration with the fixture's backend, a fresh setup per seed.
// The flags must make sense for every backend a fixture may name.
func (bf *backendFlags) fixtureRunner() (fixtures.RealRunner, error) {
	if err := bf.validate(); err != nil {
		return nil, err
	}
	return fixtures.Real(func(fx *scenario.Fixture, sc spec.Scenario) (realtime.Config, string, error) {
		flags := *bf
		flags.backend = fx.Backend
		if fx.Resource != "" {
			flags.resource = fx.Resource
		}
		flags.settingsFrom(fx.Settings)
		if d := registry.Must(registry.Drivers, fx.Agents); d.Needs.Processes {
			flags.agents = d.Name
		}
		c, err := flags.config(sc)
		if err != nil {
			return realtime.Config{}, "", err
		}
		return *c, flags.agents, nil
	}), nil
}
