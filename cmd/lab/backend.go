package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
)

// backendSim is the deterministic simulator, the default backend.
const backendSim = "sim"

// backendFlags choose where a run's leases and writes live: the simulator,
// or the real-time runner on the in-memory coordinator or on etcd.
type backendFlags struct {
	backend, resource string
	etcdMembers       int
	etcdEndpoints     string
	timeScale         float64
}

const backendUsage = `where the leases live: sim (the deterministic simulator), memory (agents in real
time on the in-memory coordinator) or etcd (in real time on etcd)`

func (bf *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&bf.backend, "backend", backendSim, backendUsage)
	fs.StringVar(&bf.resource, "resource", "", "real backends: where the gates live: memory, sqlite (a temporary file) or etcd (default: the backend's own)")
	fs.IntVar(&bf.etcdMembers, "etcd-members", 0, "--backend etcd: the embedded cluster's size (default 1)")
	fs.StringVar(&bf.etcdEndpoints, "etcd-endpoints", "", "--backend etcd: use the existing cluster at `URL,...` (keys under a fresh prefix, removed after)")
	fs.Float64Var(&bf.timeScale, "time-scale", 0, "real backends: stretch every time of the scenario by `K` (default 1 on memory; on etcd the smallest K that makes the TTL whole seconds)")
}

// real reports whether the flags choose the real-time runner.
func (bf *backendFlags) real() bool { return bf.backend != backendSim }

// config checks the flags against sc and returns the real-time runner's
// configuration; for the simulator, nil. Every problem is one line naming
// the flag.
func (bf *backendFlags) config(sc harness.Scenario) (*realtime.Config, error) {
	if !bf.real() {
		switch {
		case bf.resource != "":
			return nil, errors.New("--resource: the simulator keeps its resources in memory; --resource needs --backend memory or etcd")
		case bf.etcdMembers != 0 || bf.etcdEndpoints != "":
			return nil, errors.New("--etcd-members and --etcd-endpoints need --backend etcd")
		case bf.timeScale != 0:
			return nil, errors.New("--time-scale: the simulator runs on virtual time; --time-scale needs --backend memory or etcd")
		}
		return nil, nil
	}
	c := &realtime.Config{Backend: bf.backend, Resource: bf.resource, EtcdMembers: bf.etcdMembers, TimeScale: bf.timeScale}
	if bf.etcdEndpoints != "" {
		c.EtcdEndpoints = strings.Split(bf.etcdEndpoints, ",")
	}
	if err := c.Check(sc); err != nil {
		var ce *realtime.ConfigError
		if !errors.As(err, &ce) {
			return nil, err
		}
		if ce.Setting == "scenario" {
			return nil, fmt.Errorf("--backend %s: the scenario cannot run here: %s", bf.backend, ce.Problem)
		}
		return nil, fmt.Errorf("--%s: %s", ce.Setting, ce.Problem)
	}
	return c, nil
}

// realRun is the real-time side of a run: its setup, opened when the run
// starts, and what it reports beyond the checker's verdict.
type realRun struct {
	config realtime.Config
	setup  *realtime.Setup
	runner *realtime.Runner
}

// open starts the backend and prepares the runner, so that its header is
// known before the first event.
func (rr *realRun) open(ctx context.Context, sc harness.Scenario, modes []harness.Mode, subs []harness.Subscriber) error {
	s, err := realtime.Open(ctx, rr.config, sc)
	if err != nil {
		return err
	}
	rr.setup = s
	r, err := s.NewRunner(harness.RunOptions{Modes: modes, Subscribers: subs})
	if err != nil {
		s.Close()
		return err
	}
	rr.runner = r
	return nil
}

// header is the history header of the run.
func (rr *realRun) header() history.Header { return rr.runner.Header() }

// realFigures are what a real-time run reports beyond the checker's
// verdict: where it ran, and how long it took on the wall clock.
type realFigures struct {
	Where     string              `json:"where"`
	Resource  string              `json:"resource"`
	WallMS    int64               `json:"wall_ms"`
	TimeScale float64             `json:"time_scale"`
	Faults    realtime.FaultStats `json:"faults"`
}

func (rr *realRun) figures(res *realtime.Result) *realFigures {
	return &realFigures{Where: rr.setup.Describe(), Resource: res.Store, WallMS: res.Wall.Milliseconds(),
		TimeScale: rr.setup.Scale, Faults: res.Faults}
}

// runInfo is what a report says about the runner beside the checker's
// verdict: the backend (from the history header) and, for a real-time
// run that just happened, its wall-clock figures.
type runInfo struct {
	backend string
	real    *realFigures
}

// writeRunInfo writes the report's backend lines; the simulator's report
// has none.
func writeRunInfo(w interface{ Write([]byte) (int, error) }, info runInfo) {
	if info.backend == "" || info.backend == backendSim {
		return
	}
	if info.real == nil {
		fmt.Fprintf(w, "backend %s: a real-time run; times are true wall-clock time since it began\n", info.backend)
		return
	}
	r := info.real
	fmt.Fprintf(w, "backend %s · %v of wall time at time scale %gx\n", r.Where,
		(time.Duration(r.WallMS) * time.Millisecond).Truncate(time.Millisecond), r.TimeScale)
	fmt.Fprintf(w, "fault layer: %d calls, %d requests dropped (%d cut by a partition), %d replies dropped, %d duplicated\n",
		r.Faults.Calls, r.Faults.RequestsDropped, r.Faults.Partitioned, r.Faults.RepliesDropped, r.Faults.Duplicated)
}

// fixtureRunner is how lab fixtures runs a fixture on a real backend: the
// flags' configuration with the fixture's backend, a fresh setup per seed.
// The flags must make sense for every backend a fixture may name.
func (bf *backendFlags) fixtureRunner() (func(context.Context, string, harness.Scenario, harness.RunOptions) (*harness.Result, error), error) {
	if bf.backend == backendSim && (bf.resource != "" || bf.etcdMembers != 0 || bf.etcdEndpoints != "" || bf.timeScale != 0) {
		if _, err := bf.config(harness.Scenario{}); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, backend string, sc harness.Scenario, opts harness.RunOptions) (*harness.Result, error) {
		flags := *bf
		flags.backend = backend
		c, err := flags.config(sc)
		if err != nil {
			return nil, err
		}
		res, err := realtime.RunScenario(ctx, *c, sc, opts)
		if res == nil {
			return nil, err
		}
		return res.Result, err
	}, nil
}
