package procdriver_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// The test binary is the child too: Runner re-executes it with ChildArg.
func TestMain(m *testing.M) {
	procdriver.RunIfChild()
	if dir := os.Getenv(parentEnv); dir != "" {
		os.Exit(asParent(dir))
	}
	if spec := os.Getenv(holderEnv); spec != "" {
		os.Exit(asHolder(spec))
	}
	os.Exit(m.Run())
}

// setup opens an embedded etcd and the given store under a directory of
// the test, closed at its end.
func setup(t *testing.T, store string, sc spec.Scenario) *realtime.Setup {
	t.Helper()
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Etcd, Resource: store, TempDir: t.TempDir()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// overlap is the overlap scenario, short, with every other write stalled
// past the TTL so that a few seconds see leases taken from paused holders.
func overlap(d time.Duration) spec.Scenario {
	sc, _ := spec.Builtin("overlap")
	sc.Duration = d
	sc.Agent.Stall.TailP = 0.5
	return sc
}

func run(t *testing.T, s *realtime.Setup, opts procdriver.Options) *procdriver.Result {
	t.Helper()
	res, _ := runWithHeader(t, s, opts)
	return res
}

// runWithHeader runs s with opts, and returns the run's header too.
func runWithHeader(t *testing.T, s *realtime.Setup, opts procdriver.Options) (*procdriver.Result, history.Header) {
	t.Helper()
	r, err := procdriver.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res, r.Header()
}

// Agents as processes paused by SIGSTOP between their check and their
// write, on etcd, with the gates in the SQLite file or in etcd: the naive
// mode lands stale writes, the fenced mode refuses them. Real time is not
// deterministic, so up to three seeds are tried for the at-least counts;
// the invariants are asserted on every run.
func TestOverlapPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and eight processes for several seconds")
	}
	t.Parallel()
	for _, store := range []string{registry.SQLite, registry.Etcd} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 3; seed++ {
				sc := overlap(8 * time.Second)
				sc.Seed = seed
				if pausedRun(t, setup(t, store, sc)) {
					return
				}
			}
			t.Error("in 3 seeds, no run had the naive mode land a stale write and the fenced mode refuse one")
		})
	}
}

// pausedRun runs s with its agents as processes, checks what every such
// run must show, and reports whether the naive mode landed a stale write
// and the fenced mode refused one.
func pausedRun(t *testing.T, s *realtime.Setup) bool {
	t.Helper()
	// The dashboard's fold, fed as the children report: an agent whose
	// process is being paused past its TTL shows as stalled.
	h := s.Scenario.Header([]history.Mode{history.Naive, history.Fenced})
	fold := liveview.New(&h, history.Fenced, 0)
	var paused, shown int
	live := history.SubscriberFunc(func(e history.Event) {
		if e.Mode != history.Fenced {
			return
		}
		fold.Add(&e)
		if e.Kind == history.StallBegan && e.Dur > s.Scenario.TTL {
			paused++
			if fold.Snapshot(e.At).Agents[e.Agent].State == history.AgentStalled {
				shown++
			}
		}
	})
	res := run(t, s, procdriver.Options{Live: []history.Subscriber{live}})
	if shown != paused {
		t.Errorf("the live fold showed %d of %d long pauses as stalls", shown, paused)
	}
	n, f := res.Modes[history.Naive], res.Modes[history.Fenced]
	t.Logf("seed %d: processes %+v; naive: %d stale landed; fenced: %d refused; %d events",
		s.Scenario.Seed, res.Processes, n.StaleWritesLanded, f.CommitsRefused, res.Events)
	if res.Agents != registry.Process || res.Processes[history.Naive].Paused == 0 || res.Processes[history.Fenced].Paused == 0 {
		t.Errorf("agents %q, processes %+v: want processes paused in both modes", res.Agents, res.Processes)
	}
	assertInvariants(t, res)
	if f.FenceReuses != 0 {
		t.Errorf("fenced: %d fence reuses", f.FenceReuses)
	}
	return n.StaleWritesLanded > 0 && f.CommitsRefused > 0 && paused > 0
}

// assertInvariants fails t if the checker found a violation, or the fenced
// mode landed a stale write or refused one it cannot explain.
func assertInvariants(t *testing.T, res *procdriver.Result) {
	t.Helper()
	if v := res.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
	if f, ok := res.Modes[history.Fenced]; ok && (f.StaleWritesLanded != 0 || f.UnexplainedRefusals != 0) {
		t.Errorf("fenced: %d stale writes landed, %d unexplained refusals", f.StaleWritesLanded, f.UnexplainedRefusals)
	}
}

// parentEnv names the directory of a parent process the test starts:
// the test binary, run as a parent of agents (asParent); parentModesEnv,
// if set, its modes (comma-separated) on the Redis backend, library
// contenders among them.
const (
	parentEnv      = "PROCDRIVER_TEST_PARENT_DIR"
	parentModesEnv = "PROCDRIVER_TEST_PARENT_MODES"
)

// grantedLine is what a parent (asParent) prints once its run granted a
// lease: the run is under way.
const grantedLine = "granted"

// asParent runs a minute of overlap with two agents as processes, until
// SIGTERM or SIGINT ends it, and says grantedLine at its first grant.
func asParent(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sc := overlap(time.Minute)
	sc.Agents = 2
	c := realtime.Config{Backend: registry.Etcd, Resource: registry.SQLite, TempDir: dir}
	modes := []history.Mode{history.Naive, history.Fenced}
	if list := os.Getenv(parentModesEnv); list != "" {
		c = realtime.Config{Backend: registry.Redis, TempDir: dir}
		modes = nil
		for _, m := range strings.Split(list, ",") {
			modes = append(modes, history.Mode(m))
		}
	}
	said := false
	granted := history.SubscriberFunc(func(e history.Event) {
		if e.Kind == history.Granted && !said {
			said = true
			fmt.Println(grantedLine)
		}
	})
	res, err := procdriver.RunScenario(ctx, c, sc, procdriver.Options{Modes: modes, Live: []history.Subscriber{granted}})
	if res == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
