package realtime_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/etcdbackend"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/realtime/sqlitestore"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// The helpers every real-time test shares (package runtest).
var (
	short            = runtest.Short
	runRecorded      = runtest.RunRecorded
	checkRoundTrip   = runtest.CheckRoundTrip
	assertInvariants = runtest.AssertInvariants
	etcdSetup        = runtest.EtcdSetup
)

// Every built-in scenario, in real time on the in-memory coordinator at a
// tenth of its time: the fenced mode keeps its invariants, and the history
// file gives back the same report.
func TestBuiltinsOnMemory(t *testing.T) {
	t.Parallel() // real time mostly waits: the runs share the cores well
	for _, name := range spec.BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := short(t, name, 12*time.Second, 0.1)
			res, file := runRecorded(t, sc, realtime.Options{})
			assertInvariants(t, res)
			checkRoundTrip(t, res, file)
			if res.Backend != "memory" || res.Events == 0 {
				t.Errorf("backend %q, %d events", res.Backend, res.Events)
			}
			if res.Wall < sc.Duration || res.Wall > sc.Duration+2*time.Second {
				t.Errorf("ran %v of wall time for a %v scenario", res.Wall, sc.Duration)
			}
		})
	}
}

// The naive mode of overlap does land stale writes on the in-memory
// coordinator, and the fenced mode refuses them: the runner shows what the
// simulator shows.
func TestOverlapOnMemory(t *testing.T) {
	t.Parallel()
	sc := short(t, "overlap", 40*time.Second, 0.1)
	res, _ := runRecorded(t, sc, realtime.Options{Store: newSQLite(t)})
	assertInvariants(t, res)
	if n, f := res.Modes[history.Naive], res.Modes[history.Fenced]; n.StaleWritesLanded == 0 || f.CommitsRefused == 0 {
		t.Errorf("naive landed %d stale writes, fenced refused %d: want both > 0", n.StaleWritesLanded, f.CommitsRefused)
	}
	if res.Store != "sqlite" {
		t.Errorf("store %q, want sqlite", res.Store)
	}
}

func newSQLite(t *testing.T) *sqlitestore.SQLiteStore {
	t.Helper()
	s, err := sqlitestore.NewSQLiteStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the store's directory is left behind: %v", err)
		}
	})
	return s
}

// On a real etcd, in the overlap scenario (every other write stalled past
// the TTL, so that a few seconds suffice): the naive mode lands a stale
// write silently and the fenced mode refuses it. Real time is not
// deterministic, so a few seeds are tried; the invariants are asserted on
// every run.
func TestEtcdOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd for several seconds")
	}
	t.Parallel()
	sc, _ := spec.Builtin("overlap")
	sc.Duration = 8 * time.Second
	sc.Agent.Stall.TailP = 0.5
	for seed := uint64(1); seed <= 3; seed++ {
		sc.Seed = seed
		s := etcdSetup(t, 1, sc)
		res, file := runRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
		assertInvariants(t, res)
		checkRoundTrip(t, res, file)
		if s.Scale != 1 || res.Backend != "etcd" || res.Store != "etcd" {
			t.Errorf("scale %v, backend %q, store %q", s.Scale, res.Backend, res.Store)
		}
		n, f := res.Modes[history.Naive], res.Modes[history.Fenced]
		t.Logf("seed %d: naive landed %d stale writes; fenced refused %d", seed, n.StaleWritesLanded, f.CommitsRefused)
		if n.StaleWritesLanded > 0 && f.CommitsRefused > 0 {
			return
		}
	}
	t.Error("in 3 seeds, no run had the naive mode land a stale write and the fenced mode refuse one")
}

// Interrupting a run on etcd and closing its setup leaves no member
// running, no port open and no directory behind.
func TestEtcdInterruptLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	sc, _ := spec.Builtin("overlap")
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Etcd, TempDir: parent}, sc)
	if err != nil {
		t.Fatal(err)
	}
	e := s.Backend.(*etcdbackend.Etcd)
	endpoint := e.Cluster().Endpoints()[0]
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	res, err := s.Run(ctx, realtime.RunOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || res.Events == 0 {
		t.Fatalf("interrupted run: %v, %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, m := range e.Cluster().Members {
		if m.Running() {
			t.Errorf("member %s still running", m.Name)
		}
	}
	u, _ := url.Parse(endpoint)
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections", u.Host)
	}
	left, _ := os.ReadDir(parent)
	if len(left) > 0 {
		t.Errorf("left behind in %s: %v", parent, left)
	}
}

// Config.Check refuses what cannot run, naming the setting.
func TestConfigCheck(t *testing.T) {
	overlap, _ := spec.Builtin("overlap")
	tiny := overlap
	tiny.TTL = 50 * time.Millisecond
	tiny.ClockSkew = 0
	lost, _ := spec.Builtin("restart-lost")
	drift := overlap
	drift.Clocks.CoordinatorDriftPPM = 100
	for _, tc := range []struct {
		name    string
		c       realtime.Config
		sc      spec.Scenario
		setting string
	}{
		{"unknown backend", realtime.Config{Backend: "zookeeper"}, overlap, "backend"},
		{"unknown resource", realtime.Config{Backend: "memory", Resource: "redis"}, overlap, "resource"},
		{"etcd gate without etcd", realtime.Config{Backend: "memory", Resource: "etcd"}, overlap, "resource"},
		{"members without etcd", realtime.Config{Backend: "memory", EtcdMembers: 3}, overlap, "backend"},
		{"members and endpoints", realtime.Config{Backend: "etcd", EtcdMembers: 3, EtcdEndpoints: []string{"http://127.0.0.1:2379"}}, overlap, "etcd-members"},
		{"too many members", realtime.Config{Backend: "etcd", EtcdMembers: 9}, overlap, "etcd-members"},
		{"endpoint not a URL", realtime.Config{Backend: "etcd", EtcdEndpoints: []string{"localhost:2379"}}, overlap, "etcd-endpoints"},
		{"negative scale", realtime.Config{Backend: "memory", TimeScale: -1}, overlap, "time-scale"},
		{"ttl too short for etcd", realtime.Config{Backend: "etcd"}, tiny, "scenario"},
		{"scale off whole seconds", realtime.Config{Backend: "etcd", TimeScale: 1.5}, overlap, "time-scale"},
		{"lost restart with etcd gates", realtime.Config{Backend: "etcd"}, lost, "resource"},
		{"restart of a given cluster", realtime.Config{Backend: "etcd", Resource: "memory", EtcdEndpoints: []string{"http://127.0.0.1:2379"}}, lost, "scenario"},
		{"coordinator drift on etcd", realtime.Config{Backend: "etcd"}, drift, "scenario"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Check(tc.sc)
			var ce *realtime.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, realtime.ErrBadConfig) {
				t.Fatalf("Check = %v, want a *ConfigError", err)
			}
			if ce.Setting != tc.setting {
				t.Errorf("setting %q, want %q (%v)", ce.Setting, tc.setting, err)
			}
		})
	}
	if err := (realtime.Config{Backend: "etcd", Resource: "sqlite"}).Check(lost); err != nil {
		t.Errorf("a lost restart with SQLite gates: %v", err)
	}
}

// WholeSecondScale maps sub-second and fractional TTLs onto whole
// seconds, and refuses what would take too long.
func TestWholeSecondScale(t *testing.T) {
	for _, tc := range []struct {
		ttl, min time.Duration
		want     float64
		err      bool
	}{
		{time.Second, time.Second, 1, false},
		{500 * time.Millisecond, time.Second, 2, false},
		{1500 * time.Millisecond, time.Second, 4.0 / 3, false},
		{time.Second, 2 * time.Second, 2, false},
		{200 * time.Millisecond, time.Second, 5, false},
		{50 * time.Millisecond, time.Second, 0, true},
		{0, time.Second, 0, true},
	} {
		k, err := realtime.WholeSecondScale(tc.ttl, tc.min)
		if (err != nil) != tc.err || (err == nil && k != tc.want) {
			t.Errorf("WholeSecondScale(%v, %v) = %v, %v; want %v (error %v)", tc.ttl, tc.min, k, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, realtime.ErrUnmappable) {
			t.Errorf("error %v does not match ErrUnmappable", err)
		}
	}
	sc, _ := spec.Builtin("overlap")
	sc.TTL = 1500 * time.Millisecond
	got, k, err := realtime.MapOntoEtcd(sc, time.Second, 0)
	if err != nil || got.TTL != 2*time.Second || k != 4.0/3 {
		t.Fatalf("MapOntoEtcd: ttl %v, scale %v, %v", got.TTL, k, err)
	}
	if got.Duration != time.Duration(float64(sc.Duration)*k) || got.Agent.Stall.TailMax != time.Duration(float64(sc.Agent.Stall.TailMax)*k) {
		t.Errorf("MapOntoEtcd stretched the duration to %v and the stall tail to %v", got.Duration, got.Agent.Stall.TailMax)
	}
	if !reflect.DeepEqual(realtime.Scale(sc, 1), sc) {
		t.Error("Scale by 1 changed the scenario")
	}
}

// Live is what a dashboard steers: its snapshots come from the run's own
// events, a drop rate reaches every agent's fault layer and is recorded,
// and what real time cannot do is refused with ErrRealTime.
func TestLive(t *testing.T) {
	sc := short(t, "overlap", 20*time.Second, 0.1)
	live, err := realtime.NewLive(sc, realtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := live.Snapshot(history.Fenced); !ok || s.Now != 0 || len(s.Agents) != 4 {
		t.Fatalf("snapshot before the run: %+v, %v", s, ok)
	}
	done := make(chan error)
	go func() { done <- live.Run(t.Context(), 0) }()
	// The run's clock starts when Run does, not here: wait until the run
	// shows an event of its own, so that 500ms from then is 500ms of the
	// run's time however late a loaded machine started it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if s, _ := live.Snapshot(history.Fenced); s.Now > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run showed no event in 10s")
		}
	}
	time.Sleep(500 * time.Millisecond)
	if err := live.Intervene(history.Intervention{Kind: history.SetDropRate, Value: 1}); err != nil {
		t.Fatal(err)
	}
	// A live stall is the agent's own input, as in the simulator; the push
	// is the coordinator's, and cannot be toggled in real time.
	if err := live.Intervene(history.Intervention{Kind: history.StallAgent, Agent: "agent-1", Duration: time.Second}); err != nil {
		t.Errorf("Intervene(stall-agent) = %v", err)
	}
	if err := live.Intervene(history.Intervention{Kind: history.TogglePush}); !errors.Is(err, realtime.ErrRealTime) {
		t.Errorf("Intervene(toggle-push) = %v, want ErrRealTime", err)
	}
	if err := live.SetSpeed(2); !errors.Is(err, realtime.ErrRealTime) || live.Step() {
		t.Errorf("SetSpeed(2) = %v; Step stepped", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The two applied, in order, at the instants they were: a report lists them.
	if ivs := live.Interventions(); len(ivs) != 2 || ivs[0].Kind != history.SetDropRate || ivs[1].Kind != history.StallAgent ||
		ivs[0].At < 500*time.Millisecond || ivs[1].At < ivs[0].At {
		t.Errorf("Interventions() = %+v, want the drop rate then the stall, from 500ms", ivs)
	}
	res := live.Result()
	if res == nil || res.Faults.RequestsDropped == 0 {
		t.Fatalf("after a drop rate of 1: %+v", res)
	}
	assertInvariants(t, res)
	s, _ := live.Snapshot(history.Fenced)
	if !s.Done || s.DropRate != 1 || s.Totals.Acquisitions != res.Modes[history.Fenced].Acquisitions ||
		s.Totals.CommitsRefused != res.Modes[history.Fenced].CommitsRefused || len(s.Refusals) != s.Totals.CommitsRefused {
		t.Errorf("final snapshot: done %v, drop %v, totals %+v; report %+v", s.Done, s.DropRate, s.Totals, res.Modes[history.Fenced])
	}
	if s.Now != res.Wall {
		t.Errorf("snapshot at %v, run lasted %v", s.Now, res.Wall)
	}
}

// A restart asked for from the dashboard restarts the coordinators and is
// in the history; on a cluster the lab did not start it is refused.
func TestLiveRestart(t *testing.T) {
	sc := short(t, "overlap", 15*time.Second, 0.1)
	var restarts atomic.Int64
	live, err := realtime.NewLive(sc, realtime.Options{Modes: []history.Mode{history.Fenced},
		Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) {
			if e.Kind == history.CoordinatorRestarted && e.Outcome == history.OutcomeCounterLost {
				restarts.Add(1)
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Intervene(history.Intervention{Kind: history.RestartCoordinator}); !errors.Is(err, realtime.ErrRealTime) {
		t.Errorf("a restart before the run: %v, want ErrRealTime", err)
	}
	done := make(chan error)
	go func() { done <- live.Run(t.Context(), 0) }()
	time.Sleep(600 * time.Millisecond)
	if err := live.Intervene(history.Intervention{Kind: history.RestartCoordinator}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	assertInvariants(t, live.Result())
	if restarts.Load() != 1 {
		t.Errorf("%d restarts that lost the counter recorded, want 1", restarts.Load())
	}
}

// A restart that loses the counter is refused while the resources are etcd
// gates: the fresh etcd would forget their floors (a named error), from
// New as from the configuration.
func TestRestartLostOnEtcdGatesRefused(t *testing.T) {
	sc, _ := spec.Builtin("restart-lost")
	if _, err := realtime.New(sc, realtime.Options{Store: etcdbackend.EtcdStore{}}); !errors.Is(err, realtime.ErrFloorsLost) {
		t.Errorf("New = %v, want ErrFloorsLost", err)
	}
	if err := (realtime.Config{Backend: registry.Etcd, Resource: registry.Etcd}).Check(sc); !errors.Is(err, realtime.ErrFloorsLost) {
		t.Errorf("Config.Check = %v, want ErrFloorsLost", err)
	}
	sc, _ = spec.Builtin("restart-persisted")
	if _, err := realtime.New(sc, realtime.Options{Store: etcdbackend.EtcdStore{}}); err != nil {
		t.Errorf("New with a persisted restart = %v", err)
	}
}

// lingeringRestart is a backend whose new coordinators serve before its
// Restart returns, as a real store's do while the restart finishes its
// bookkeeping (a new client, the old one closed).
type lingeringRestart struct{ *realtime.Memory }

func (b lingeringRestart) Restart(ctx context.Context, persist bool) error {
	if err := b.Memory.Restart(ctx, persist); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	return nil
}

// Every fence the new coordinators mint is recorded under their own
// incarnation, however long Restart takes to return: the checker sees
// each reuse after the restart that lost the counter, and excuses it.
func TestRestartRecordsNewGrantsUnderTheNewIncarnation(t *testing.T) {
	t.Parallel()
	sc := short(t, "restart-lost", 20*time.Second, 0.1)
	res, file := runRecorded(t, sc, realtime.Options{Backend: lingeringRestart{realtime.NewMemory()}})
	assertInvariants(t, res)
	checkRoundTrip(t, res, file)
	if f := res.Modes[history.Fenced]; f.FenceReuses == 0 || f.UnexcusedFenceReuses != 0 {
		t.Errorf("fenced: %d fence reuses, %d unexcused: want some, all excused", f.FenceReuses, f.UnexcusedFenceReuses)
	}
}

// slowOpen is a backend whose Open waits for its context and then fails
// with an error of its own, as a dial cut short does.
type slowOpen struct{ *realtime.Memory }

func (b slowOpen) Open(ctx context.Context, _ history.Mode, _ leasefence.Clock, _ time.Duration) (func() leasefence.Service, error) {
	<-ctx.Done()
	return nil, errors.New("dial: connection attempt abandoned")
}

// A run interrupted while its backend opens says it was interrupted, so
// that the command reports an interruption, not bad input.
func TestInterruptedWhileOpening(t *testing.T) {
	t.Parallel()
	r, err := realtime.New(short(t, "overlap", time.Second, 0.1), realtime.Options{Backend: slowOpen{realtime.NewMemory()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.Run(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection attempt abandoned") {
		t.Errorf("Run = %v, want the context's error with the open's", err)
	}
}
