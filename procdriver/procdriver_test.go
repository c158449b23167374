package procdriver_test

import (
	"os"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// The test binary is the child too: Runner re-executes it with ChildArg.
func TestMain(m *testing.M) {
	procdriver.RunIfChild()
	if dir := os.Getenv(parentEnv); dir != "" {
		os.Exit(asParent(dir))
	}
	os.Exit(m.Run())
}

// setup opens an embedded etcd and the given store under a directory of
// the test, closed at its end.
func setup(t *testing.T, store string, sc spec.Scenario) *realtime.Setup {
	t.Helper()
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: realtime.BackendEtcd, Resource: store, TempDir: t.TempDir()}, sc)
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
	r, err := procdriver.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Agents as processes paused by SIGSTOP between their check and their
// write, on etcd, with the gates in the SQLite file or in etcd: the naive
// mode lands stale writes, the fenced mode refuses them.
func TestOverlapPaused(t *testing.T) {
	for _, store := range []string{realtime.StoreSQLite, realtime.StoreEtcd} {
		t.Run(store, func(t *testing.T) {
			s := setup(t, store, overlap(8*time.Second))
			res := run(t, s, procdriver.Options{})
			n, f := res.Modes[history.Naive], res.Modes[history.Fenced]
			t.Logf("processes %+v; naive: %d stale landed; fenced: %d stale landed, %d refused; events %d",
				res.Processes, n.StaleWritesLanded, f.StaleWritesLanded, f.CommitsRefused, res.Events)
			if res.Agents != procdriver.AgentsProcess || res.Processes[history.Naive].Paused == 0 || res.Processes[history.Fenced].Paused == 0 {
				t.Errorf("agents %q, processes %+v: want processes paused in both modes", res.Agents, res.Processes)
			}
			assertInvariants(t, res)
			if n.StaleWritesLanded == 0 {
				t.Error("naive: no stale write landed")
			}
			if f.StaleWritesLanded != 0 || f.FenceReuses != 0 || f.CommitsRefused == 0 {
				t.Errorf("fenced: %d stale writes landed, %d fence reuses, %d commits refused", f.StaleWritesLanded, f.FenceReuses, f.CommitsRefused)
			}
		})
	}
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
