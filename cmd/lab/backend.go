package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// backendSim is the deterministic simulator, the default backend.
const backendSim = report.BackendSim

// backendFlags choose where a run's leases and writes live: the simulator,
// or the real-time runner on the in-memory coordinator or on etcd.
type backendFlags struct {
	backend, resource string
	backendGiven      bool // --backend was on the command line
	agentsGiven       bool // --agents-as was
	etcdMembers       int
	etcdEndpoints     string
	redisURL          string
	timeScale         float64
	agents            string
}

const backendUsage = `where the leases live: sim (the deterministic simulator), memory (agents in real
time on the in-memory coordinator), etcd or redis (in real time on etcd, on Redis)`

func (bf *backendFlags) register(fs *flag.FlagSet) {
	bf.backend = backendSim
	fs.Var(givenString{&bf.backend, &bf.backendGiven}, "backend", backendUsage)
	fs.StringVar(&bf.resource, "resource", "", "real backends: where the gates live: memory, sqlite (a temporary file), etcd, redis or http (a server per resource on\n"+
		"a loopback port, verifying signed proofs; alone, it runs on --backend memory) (default: the backend's own)")
	fs.IntVar(&bf.etcdMembers, "etcd-members", 0, "--backend etcd: the embedded cluster's size (default 1, or the scenario's etcd.members); more than one runs each member as a process behind proxies")
	fs.StringVar(&bf.etcdEndpoints, "etcd-endpoints", "", "--backend etcd: use the existing cluster at `URL,...` (keys under a fresh prefix, removed after)")
	fs.StringVar(&bf.redisURL, "redis-url", "", "--backend redis: use the existing server at `URL` (keys under a fresh prefix, removed after) instead of a throwaway redis-server")
	bf.agents = procdriver.AgentsInProcess
	fs.Var(givenString{&bf.agents, &bf.agentsGiven}, "agents-as", "real backends: how the agents run: in-process (goroutines) or process (each an OS process, paused by SIGSTOP; --backend etcd)")
	fs.Float64Var(&bf.timeScale, "time-scale", 0, "real backends: stretch every time of the scenario by `K` (default 1 on memory; on etcd the smallest K that makes the TTL whole seconds)")
	if f := fs.Lookup("agents"); f != nil {
		f.Value = agentsValue{count: f.Value, bf: bf}
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
	if s == procdriver.AgentsProcess || s == procdriver.AgentsInProcess {
		v.bf.agents, v.bf.agentsGiven = s, true
		return nil
	}
	if err := v.count.Set(s); err != nil {
		return fmt.Errorf("%w (or %s|%s, as --agents-as takes it)", err, procdriver.AgentsProcess, procdriver.AgentsInProcess)
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
	if !bf.agentsGiven && fx.Agents == scenario.AgentsProcess {
		bf.agents = procdriver.AgentsProcess
	}
}

// real reports whether the flags choose the real-time runner.
func (bf *backendFlags) real() bool { return bf.backend != backendSim && bf.backend != "" }

// validate checks each flag's own value, before any combination: the
// first problem, one line naming the flag.
func (bf *backendFlags) validate() error {
	backends := []string{backendSim, realtime.BackendMemory, realtime.BackendEtcd, realtime.BackendRedis}
	if bf.backend != "" && !slices.Contains(backends, bf.backend) {
		return fmt.Errorf("--backend: must be %s, got %q", strings.Join(backends, ", "), bf.backend)
	}
	stores := []string{realtime.StoreMemory, realtime.StoreSQLite, realtime.StoreEtcd, realtime.StoreHTTP, realtime.StoreRedis}
	if bf.resource != "" && !slices.Contains(stores, bf.resource) {
		return fmt.Errorf("--resource: must be %s, got %q", strings.Join(stores, ", "), bf.resource)
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
	if bf.redisURL != "" {
		if err := realtime.CheckRedisURL(bf.redisURL); err != nil {
			return fmt.Errorf("--redis-url: %w", err)
		}
	}
	if bf.agents != "" && bf.agents != procdriver.AgentsInProcess && bf.agents != procdriver.AgentsProcess {
		return fmt.Errorf("--agents-as: must be %s or %s, got %q", procdriver.AgentsInProcess, procdriver.AgentsProcess, bf.agents)
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
	if !bf.real() && bf.resource == realtime.StoreHTTP && !bf.backendGiven {
		// A server on a port is real by nature: --resource http alone
		// runs on the in-memory coordinator.
		flags := *bf
		flags.backend = realtime.BackendMemory
		return flags.config(sc)
	}
	if !bf.real() {
		switch {
		case sc.OverTheWire():
			return nil, errors.New("--backend: the simulator keeps its resources in memory, and the scenario has forgers or a network.write_delay: use --resource http")
		case len(sc.Etcd.Faults) > 0:
			return nil, errors.New("--backend: the scenario has etcd member faults (etcd.faults), which the simulator's coordinator has no members to play: use --backend etcd")
		case len(sc.Crashes) > 0:
			return nil, errors.New("--backend: the scenario crashes agents (crashes), and only agents run as processes can crash: use --backend etcd --agents-as process")
		case bf.resource != "":
			return nil, errors.New("--resource: the simulator keeps its resources in memory; --resource needs --backend memory or etcd")
		case bf.etcdMembers != 0:
			return nil, errors.New("--etcd-members: needs --backend etcd")
		case bf.etcdEndpoints != "":
			return nil, errors.New("--etcd-endpoints: needs --backend etcd")
		case bf.redisURL != "":
			return nil, errors.New("--redis-url: needs --backend redis")
		case bf.timeScale != 0:
			return nil, errors.New("--time-scale: the simulator runs on virtual time; --time-scale needs --backend memory or etcd")
		case bf.processes():
			return nil, errors.New("--agents-as: the simulator's agents are its own; --agents-as process needs --backend etcd")
		}
		return nil, nil
	}
	c := &realtime.Config{Backend: bf.backend, Resource: bf.resource, EtcdMembers: bf.etcdMembers, RedisURL: bf.redisURL, TimeScale: bf.timeScale}
	if bf.etcdEndpoints != "" {
		c.EtcdEndpoints = strings.Split(bf.etcdEndpoints, ",")
	}
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
	if len(sc.Crashes) > 0 && !bf.processes() {
		return nil, errors.New("--agents-as: the scenario crashes agents (crashes), and only agents run as processes can crash: use --agents-as process")
	}
	if bf.processes() {
		if err := procdriver.Check(*c, sc); err != nil {
			return nil, fmt.Errorf("--agents-as process: %s", strings.TrimPrefix(err.Error(), procdriver.ErrCannotPlay.Error()+": "))
		}
	}
	return c, nil
}

// processes reports whether the flags run each agent as a process.
func (bf *backendFlags) processes() bool { return bf.agents == procdriver.AgentsProcess }

// realRun is the real-time side of a run: its setup, opened when the run
// starts, and what it reports beyond the checker's verdict.
type realRun struct {
	config realtime.Config
	setup  *realtime.Setup
	runner *realtime.Runner
	// With agents as processes, proc runs instead of runner, and
	// processes is what they went through.
	processes bool
	proc      *procdriver.Runner
	procStats map[history.Mode]procdriver.ProcessStats
}

// open starts the backend and prepares the runner, so that its header is
// known before the first event.
func (rr *realRun) open(ctx context.Context, sc spec.Scenario, modes []harness.Mode, subs []harness.Subscriber) error {
	s, err := realtime.Open(ctx, rr.config, sc)
	if err != nil {
		return err
	}
	rr.setup = s
	if rr.processes {
		if rr.proc, err = procdriver.New(s, procdriver.Options{Modes: modes, Subscribers: subs}); err != nil {
			s.Close()
		}
		return err
	}
	r, err := s.NewRunner(realtime.RunOptions{Modes: modes, Subscribers: subs})
	if err != nil {
		s.Close()
		return err
	}
	rr.runner = r
	return nil
}

// header is the history header of the run.
func (rr *realRun) header() history.Header {
	if rr.proc != nil {
		return rr.proc.Header()
	}
	return rr.runner.Header()
}

// run runs the scenario on the runner open made.
func (rr *realRun) run(ctx context.Context) (*realtime.Result, error) {
	if rr.proc == nil {
		return rr.runner.Run(ctx)
	}
	res, err := rr.proc.Run(ctx)
	if res == nil {
		return nil, err
	}
	rr.procStats = res.Processes
	return res.Result, err
}

// figures are what the run reports of itself beside the checker's
// verdict.
func (rr *realRun) figures(res *realtime.Result) *report.RealFigures {
	f := res.Faults
	agents := procdriver.AgentsInProcess
	if rr.processes {
		agents = procdriver.AgentsProcess
	}
	return &report.RealFigures{Where: rr.setup.Describe(), Resource: res.Store, WallMS: res.Wall.Milliseconds(),
		TimeScale: rr.setup.Scale, Faults: report.FaultCounts{Calls: f.Calls, RequestsDropped: f.RequestsDropped,
			Partitioned: f.Partitioned, Duplicated: f.Duplicated, RepliesDropped: f.RepliesDropped},
		MemberFaults: memberFaults(res), Agents: agents, Processes: processCounts(rr.procStats)}
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
func (bf *backendFlags) fixtureRunner() (scenario.RealRunner, error) {
	if err := bf.validate(); err != nil {
		return nil, err
	}
	return func(ctx context.Context, fx *scenario.Fixture, sc spec.Scenario, opts harness.RunOptions) (*harness.Result, error) {
		flags := *bf
		flags.backend = fx.Backend
		if fx.Resource != "" {
			flags.resource = fx.Resource
		}
		if fx.Agents == scenario.AgentsProcess {
			flags.agents = procdriver.AgentsProcess
		}
		c, err := flags.config(sc)
		if err != nil {
			return nil, err
		}
		if flags.processes() {
			res, err := procdriver.RunScenario(ctx, *c, sc, procdriver.Options{Modes: opts.Modes, Subscribers: opts.Subscribers})
			if res == nil {
				return nil, err
			}
			return res.Result.Result, err
		}
		res, err := realtime.RunScenario(ctx, *c, sc, realtime.RunOptions{Modes: opts.Modes, Subscribers: opts.Subscribers})
		if res == nil {
			return nil, err
		}
		return res.Result, err
	}, nil
}
