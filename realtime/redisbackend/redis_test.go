package redisbackend_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/realtime/redisbackend"
	_ "github.com/leasefence/lab/realtime/sqlitestore" // the sqlite gates some runs keep
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// needRedisServer skips a test that starts its own redis-server when none
// is installed.
func needRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH (scripts/redis.sh start installs Debian's): ", err)
	}
}

func redisSetup(t *testing.T, c realtime.Config, sc spec.Scenario) *realtime.Setup {
	t.Helper()
	c.Backend = registry.Redis
	s, err := realtime.Open(t.Context(), c, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// On a throwaway redis-server, in the overlap scenario: the naive mode's
// SET NX PX lock lands a stale write silently, and the fenced mode's gate
// in the same Redis refuses it. Real time is not deterministic, so a few
// seeds are tried; the invariants are asserted on every run.
func TestRedisOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Redis for several seconds")
	}
	needRedisServer(t)
	t.Parallel()
	sc, _ := spec.Builtin("overlap")
	sc.Duration = 6 * time.Second
	sc.Agent.Stall.TailP = 0.5
	for seed := uint64(1); seed <= 3; seed++ {
		sc.Seed = seed
		s := redisSetup(t, realtime.Config{}, sc)
		res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
		runtest.AssertInvariants(t, res)
		runtest.CheckRoundTrip(t, res, file)
		if s.Scale != 1 || res.Backend != "redis" || res.Store != "redis" {
			t.Errorf("scale %v, backend %q, store %q", s.Scale, res.Backend, res.Store)
		}
		n, f := res.Modes[history.Naive], res.Modes[history.Fenced]
		t.Logf("seed %d: naive landed %d stale writes; fenced admitted %d, refused %d", seed, n.StaleWritesLanded, f.CommitsAdmitted, f.CommitsRefused)
		if n.StaleWritesLanded > 0 && f.CommitsRefused > 0 {
			return
		}
	}
	t.Error("in 3 seeds, no run had the naive mode land a stale write and the fenced mode refuse one")
}

// restartRun runs a restart scenario cut to 5 s, the restart at 2.5 s.
func restartRun(t *testing.T, name, resource string) *realtime.Result {
	t.Helper()
	sc, _ := spec.Builtin(name)
	sc.Duration = 5 * time.Second
	sc.Restarts[0].At = 2500 * time.Millisecond
	s := redisSetup(t, realtime.Config{Resource: resource}, sc)
	res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
	runtest.CheckRoundTrip(t, res, file)
	for _, v := range res.Violations() {
		if strings.HasPrefix(v, history.LibraryErrorViolation) {
			t.Errorf("the restart cut a call in half: %s", v)
		}
	}
	return res
}

// A restart that loses the AOF reissues fences: a gate whose floor lives
// elsewhere (SQLite) refuses the new holders, and lands nothing stale.
func TestRedisRestartLostSQLiteGatesRefuse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Redis for several seconds")
	}
	needRedisServer(t)
	t.Parallel()
	res := restartRun(t, "restart-lost", registry.SQLite)
	f := res.Modes[history.Fenced]
	t.Logf("fenced: reuses %d, refused %d, reissued landed %d", f.FenceReuses, f.CommitsRefused, f.ReissuedWritesLanded)
	if f.FenceReuses == 0 || f.CommitsRefused == 0 || f.StaleWritesLanded != 0 || f.ReissuedWritesLanded != 0 {
		t.Errorf("fenced after a lost restart: %+v", f)
	}
	if n := res.Modes[history.Naive]; n.ReissuedWritesLanded == 0 {
		t.Errorf("naive: no write landed under a reissued generation: %+v", n)
	}
}

// With the gates in the same Redis, a restart without the AOF takes their
// floors with the counter: whichever write comes first after it sets the
// floor again, so a run shows reissued or stale writes landing only when a
// new holder writes first (redis-restart-rewind.yaml says so). The run's
// part that every run shows is the reissued fences; the rewind itself is
// shown step by step below.
func TestRedisRestartLostRedisGatesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Redis for several seconds")
	}
	needRedisServer(t)
	t.Parallel()
	res := restartRun(t, "restart-lost", registry.Redis)
	f := res.Modes[history.Fenced]
	t.Logf("fenced: reuses %d, refused %d, reissued landed %d, stale landed %d", f.FenceReuses, f.CommitsRefused, f.ReissuedWritesLanded, f.StaleWritesLanded)
	if f.FenceReuses == 0 {
		t.Errorf("fenced after a lost restart with the floors in Redis: %+v", f)
	}
}

// The rewind, step by step: a gate admits fence 5; Redis restarts without
// its AOF; the floor is gone, so a reissued fence 1 is admitted, and then
// the old holder's fence 5 after it. A gate in SQLite keeps its floor and
// refuses fence 1. Either way the record of landings survives the crash.
func TestRedisRestartLostRewindsTheFloor(t *testing.T) {
	needRedisServer(t)
	old := leasefence.Token{Resource: "res", Holder: "old", Fence: 5}
	reissued := leasefence.Token{Resource: "res", Holder: "new", Fence: 1}
	for _, tc := range []struct {
		store        string
		reissuedLand bool
	}{{registry.Redis, true}, {registry.SQLite, false}} {
		t.Run(tc.store, func(t *testing.T) {
			sc, _ := spec.Builtin("restart-lost")
			s := redisSetup(t, realtime.Config{Resource: tc.store, TempDir: t.TempDir()}, sc)
			ctx := t.Context()
			res, err := s.Store.Resource(ctx, history.Fenced, "res", func() time.Duration { return time.Millisecond })
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Commit(ctx, old, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.Backend.Restart(ctx, false); err != nil {
				t.Fatal(err)
			}
			err = res.Commit(ctx, reissued, 2)
			if landed := err == nil; landed != tc.reissuedLand {
				t.Fatalf("the reissued fence: %v, want landed %v", err, tc.reissuedLand)
			}
			if !tc.reissuedLand && !errors.Is(err, leasefence.ErrStaleFence) {
				t.Fatalf("the reissued fence: %v, want ErrStaleFence", err)
			}
			if err := res.Commit(ctx, old, 3); err != nil {
				t.Fatalf("the old holder after the restart: %v", err)
			}
			want := []uint64{1, 3}
			if tc.reissuedLand {
				want = []uint64{1, 2, 3}
			}
			got, err := res.Landings(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			for _, l := range got {
				ids = append(ids, l.ID)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("landings %v, want %v", ids, want)
			}
		})
	}
}

// A restart on the AOF keeps the counter: no fence is issued twice. It
// keeps the leases too, so the history records it as the server's
// restart (realtime.LeaseKeeper), not the coordinator's, which would have
// the checker forget every lease Redis kept and excuse a second grant of
// one.
func TestRedisRestartPersisted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Redis for several seconds")
	}
	needRedisServer(t)
	t.Parallel()
	res := restartRun(t, "restart-persisted", "")
	runtest.AssertInvariants(t, res)
	for _, m := range []history.Mode{history.Naive, history.Fenced} {
		r := res.Modes[m]
		if m == history.Fenced && (r.FenceReuses != 0 || r.CommitsAdmitted == 0) {
			t.Errorf("fenced after a persisted restart: %+v", r)
		}
		if len(r.FaultsOnServers) != 1 || r.FaultsOnServers[0].Fault != "restart" || !strings.HasPrefix(r.FaultsOnServers[0].Target, "redis-server ") {
			t.Errorf("%s: faults on servers %+v, want the restart of redis-server", m, r.FaultsOnServers)
		}
	}
}

// A run stopped midway (Ctrl-C) still stops the server it started and
// removes its directory; so does a run that ends.
func TestRedisRunLeavesNothing(t *testing.T) {
	needRedisServer(t)
	for _, tc := range []struct {
		name     string
		duration time.Duration
		stop     time.Duration
	}{{"interrupted", 30 * time.Second, 800 * time.Millisecond}, {"ended", 500 * time.Millisecond, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			sc, _ := spec.Builtin("overlap")
			sc.Duration = tc.duration
			s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Redis, TempDir: parent}, sc)
			if err != nil {
				t.Fatal(err)
			}
			addr := s.Backend.(*redisbackend.Redis).Addr()
			ctx := t.Context()
			if tc.stop > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.stop)
				defer cancel()
			}
			res, err := s.Run(ctx, realtime.RunOptions{})
			if (tc.stop > 0) != errors.Is(err, context.DeadlineExceeded) || res == nil || res.Events == 0 {
				t.Fatalf("run: %v, %v", res, err)
			}
			assertGone(t, s, addr, parent)
		})
	}
}

func assertGone(t *testing.T, s *realtime.Setup, addr, parent string) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections", addr)
	}
	if left, _ := os.ReadDir(parent); len(left) > 0 {
		t.Errorf("left behind in %s: %v", parent, left)
	}
}

// On a given server, the run's keys are under a prefix of its own, and
// gone once it ends.
func TestRedisURLRemovesTheRunsKeys(t *testing.T) {
	url := os.Getenv("LEASEFENCE_REDIS_URL")
	if url == "" {
		t.Skip("LEASEFENCE_REDIS_URL is not set (scripts/redis.sh start; eval \"$(scripts/redis.sh env)\")")
	}
	sc, _ := spec.Builtin("overlap")
	sc.Duration = time.Second
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{URL: url}.Entry()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Backend.(*redisbackend.Redis)
	prefix := "{" + r.Prefix() + "*"
	if _, err := s.Run(t.Context(), realtime.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	opts, _ := redis.ParseURL(url)
	cli := redis.NewClient(opts)
	defer cli.Close()
	if keys, _ := cli.Keys(t.Context(), prefix).Result(); len(keys) == 0 {
		t.Fatalf("the run wrote no key under %s", prefix)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if keys, err := cli.Keys(t.Context(), prefix).Result(); err != nil || len(keys) > 0 {
		t.Errorf("left under %s: %v (%v)", prefix, keys, err)
	}
}

// Config.Check refuses what Redis cannot run, naming the setting.
func TestRedisConfigCheck(t *testing.T) {
	overlap, _ := spec.Builtin("overlap")
	lost, _ := spec.Builtin("restart-lost")
	drift := overlap
	drift.Clocks.CoordinatorDriftPPM = 100
	for _, tc := range []struct {
		c       realtime.Config
		sc      spec.Scenario
		setting string
	}{
		{realtime.Config{Backend: registry.Memory, Resource: registry.Redis}, overlap, "resource"},
		{realtime.Config{Backend: registry.Etcd, Settings: redisbackend.Settings{URL: "redis://127.0.0.1:6379"}.Entry()}, overlap, "redis-url"},
		{realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{URL: "http://x"}.Entry()}, overlap, "redis-url"},
		{realtime.Config{Backend: registry.Redis, Settings: redisbackend.Settings{URL: "redis://127.0.0.1:6379"}.Entry()}, lost, "scenario"},
		{realtime.Config{Backend: registry.Redis}, drift, "scenario"},
		{realtime.Config{Backend: registry.Redis, TimeScale: 1.0000001}, overlap, "time-scale"},
	} {
		err := tc.c.Check(tc.sc)
		var ce *realtime.ConfigError
		if !errors.As(err, &ce) || ce.Setting != tc.setting {
			t.Errorf("%+v on %s: %v, want a problem with %s", tc.c, tc.sc.Name, err, tc.setting)
		}
	}
	for _, c := range []realtime.Config{
		{Backend: registry.Redis},
		{Backend: registry.Redis, Resource: registry.SQLite},
		{Backend: registry.Redis, Resource: registry.Redis, Settings: redisbackend.Settings{URL: "redis://127.0.0.1:6379/0"}.Entry()},
	} {
		if err := c.Check(overlap); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (realtime.Config{Backend: registry.Redis}).Check(lost); err != nil {
		t.Errorf("restart-lost with the gates in Redis is refused: %v", err)
	}
}

// Without redis-server on PATH, the error says how to get one.
func TestRedisWithoutServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	sc, _ := spec.Builtin("overlap")
	_, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Redis}, sc)
	if !errors.Is(err, redisdeploy.ErrNotInstalled) {
		t.Errorf("Open = %v, want ErrNotInstalled", err)
	}
}
