package redisbackend_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/realtime/redisbackend"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

func TestRedisTopologyConfigRefusals(t *testing.T) {
	overlap, _ := spec.Builtin("overlap")
	restart, _ := spec.Builtin("restart-persisted")
	for _, tc := range []struct {
		name    string
		c       realtime.Config
		sc      spec.Scenario
		setting string
		problem string
	}{
		{"unknown topology", realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{Topology: "cluster"}.Entry()}, overlap, "redis-topology", `"cluster"`},
		{"topology off redis", realtime.Config{Backend: registry.Memory, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel}.Entry()}, overlap, "redis-topology", "needs backend redis"},
		{"wait off redis", realtime.Config{Backend: registry.Etcd, Settings: redisbackend.Settings{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond}.Entry()}, overlap, "redis-wait-replicas", "needs backend redis"},
		{"watermark off redis", realtime.Config{Backend: registry.Memory, Settings: redisbackend.Settings{Watermark: true}.Entry()}, overlap, "redis-watermark", "needs backend redis"},
		{"sentinel and a url", realtime.Config{Backend: registry.Redis, Resource: registry.Memory, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel, URL: "redis://127.0.0.1:1/0"}.Entry()}, overlap, "redis-topology", "drop --redis-url"},
		{"sentinel and restarts", realtime.Config{Backend: registry.Redis, Resource: registry.Memory, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel}.Entry()}, restart, "scenario", "drop the restarts"},
		{"sentinel and gates in redis", realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel}.Entry()}, overlap, "resource", "outside Redis"},
		{"wait on the lone server", realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond}.Entry()}, overlap, "redis-wait-replicas", "no replicas"},
		{"wait for too many", realtime.Config{Backend: registry.Redis, Resource: registry.Memory, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel, WaitReplicas: 3, WaitTimeout: time.Second}.Entry()}, overlap, "redis-wait-replicas", "runs 2 replicas"},
		{"wait without a timeout", realtime.Config{Backend: registry.Redis, Resource: registry.Memory, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel, WaitReplicas: 1}.Entry()}, overlap, "redis-wait-timeout", "whole milliseconds"},
		{"a timeout without a wait", realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{WaitTimeout: time.Second}.Entry()}, overlap, "redis-wait-timeout", "needs --redis-wait-replicas"},
		{"negative replicas", realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{WaitReplicas: -1}.Entry()}, overlap, "redis-wait-replicas", ">= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Check(tc.sc)
			var ce *realtime.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, realtime.ErrBadConfig) || ce.Setting != tc.setting || !strings.Contains(ce.Problem, tc.problem) {
				t.Fatalf("Check = %v; want a ConfigError on %s saying %q", err, tc.setting, tc.problem)
			}
		})
	}
	ok := realtime.Config{Backend: registry.Redis, Resource: registry.SQLite, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel, WaitReplicas: 2, WaitTimeout: 100 * time.Millisecond, Watermark: true}.Entry()}
	if err := ok.Check(overlap); err != nil {
		t.Fatalf("the safe options on the sentinel topology: %v", err)
	}
	if err := (realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{Watermark: true}.Entry()}).Check(overlap); err != nil {
		t.Fatalf("a watermark on the lone server: %v", err)
	}
}

// The sentinel topology runs a scenario with no fault as one server does:
// the clients reach the primary through the Sentinels, the fenced mode
// with WAIT and a watermark, and every invariant holds. Close leaves no
// process and no directory.
func TestRedisSentinelTopologyRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis deployment")
	}
	needRedisServer(t)
	t.Parallel()
	sc, _ := spec.Builtin("overlap")
	sc.Duration = 3 * time.Second
	s := redisSetup(t, realtime.Config{Resource: registry.Memory, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel, WaitReplicas: 2, WaitTimeout: 200 * time.Millisecond, Watermark: true}.Entry()}, sc)
	r := s.Backend.(*redisbackend.Redis)
	d := r.Deployment()
	if d == nil || len(d.Servers) != 3 || len(d.Sentinels) != 3 {
		t.Fatalf("deployment %v", d)
	}
	if desc := s.Describe(); !strings.Contains(desc, "sentinel topology") || !strings.Contains(desc, "WAIT 2 replicas, 200ms + watermark") {
		t.Errorf("Describe = %q", desc)
	}
	res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
	runtest.AssertInvariants(t, res)
	runtest.CheckRoundTrip(t, res, file)
	if f := res.Modes[history.Fenced]; f.CommitsAdmitted == 0 {
		t.Errorf("fenced admitted nothing: %+v", f)
	}
	dir := r.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, srv := range append(d.Servers, d.Sentinels...) {
		if srv.Running() {
			t.Errorf("%s still runs after Close", srv.Name)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s is still there after Close", dir)
	}
}

// A fault of the primary is a fault_began/fault_ended pair in every mode,
// its end saying which replica was promoted; a fault the run's end cuts
// before any failover fails the run, naming it.
func TestRedisPrimaryFaultsInTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis deployment twice")
	}
	needRedisServer(t)
	t.Parallel()
	sc, _ := spec.Builtin("overlap")
	sc.Duration = 5 * time.Second
	sc.Agent.Stall.TailP = 0
	sc.Faults = []spec.TimedFault{{At: 500 * time.Millisecond, Do: spec.FaultPausePrimary, Duration: 4 * time.Second}}
	c := realtime.Config{Resource: registry.Memory, Settings: redisbackend.Settings{Topology: redisbackend.RedisSentinel}.Entry()}
	s := redisSetup(t, c, sc)
	res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
	runtest.CheckRoundTrip(t, res, file)
	for _, m := range res.Modes {
		if len(m.FaultsOnServers) != 1 {
			t.Fatalf("%s: primary faults %+v", m.Mode, m.FaultsOnServers)
		}
		f := m.FaultsOnServers[0]
		if f.NotPlayed || f.Target != "redis primary redis-0" || !f.FailedOver || !strings.Contains(f.Ended, "promoted") || f.Fault != string(spec.FaultPausePrimary) {
			t.Fatalf("%s: the pause: %+v", m.Mode, f)
		}
	}
	events := string(file)
	for _, want := range []string{`"kind":"fault_began"`, `"kind":"fault_ended"`, `"fault":"pause_primary"`, `"target":"redis primary redis-0"`, "promoted"} {
		if !strings.Contains(events, want) {
			t.Errorf("the history has no %s", want)
		}
	}

	sc.Duration = 3 * time.Second
	sc.Faults = []spec.TimedFault{{At: 2900 * time.Millisecond, Do: spec.FaultPartitionPrimary, Duration: 2 * time.Second}}
	c.Backend = registry.Redis
	cut, err := realtime.RunScenario(t.Context(), c, sc, realtime.RunOptions{})
	if !errors.Is(err, redisbackend.ErrNoFailover) || !strings.Contains(err.Error(), "partition_primary") {
		t.Fatalf("a partition the run's end cut: %v; want ErrNoFailover naming it", err)
	}
	if cut == nil || len(cut.Modes[history.Fenced].FaultsOnServers) != 1 || !strings.Contains(cut.Modes[history.Fenced].FaultsOnServers[0].Ended, "no replica was promoted") {
		t.Fatalf("the cut partition's record: %+v", cut)
	}
}
