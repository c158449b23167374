package realtime_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// Crashes need agents as processes: the in-process runner and the
// simulator refuse them before anything starts.
func TestCrashesNeedProcesses(t *testing.T) {
	sc := short(t, "overlap", 2*time.Second, 0.1)
	sc.Crashes = []spec.Crash{{Agent: "agent-1", At: sc.Duration / 2}}
	if _, err := realtime.New(sc, realtime.Options{}); !errors.Is(err, spec.ErrNeedsProcesses) {
		t.Errorf("New: %v, want ErrNeedsProcesses", err)
	}
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{}); !errors.Is(err, spec.ErrNeedsProcesses) {
		t.Errorf("the simulator: %v, want ErrNeedsProcesses", err)
	}
	if _, err := harness.NewSim(sc, history.Fenced); !errors.Is(err, spec.ErrNeedsProcesses) {
		t.Errorf("NewSim: %v, want ErrNeedsProcesses", err)
	}
}

// The simulator refuses etcd member faults rather than run without them.
func TestSimulatorRefusesMemberFaults(t *testing.T) {
	sc := short(t, "overlap", 2*time.Second, 1)
	sc.Etcd = spec.Etcd{Members: 3}
	sc.Faults = []spec.TimedFault{{At: time.Second, Do: spec.FaultPauseLeader, Duration: time.Second}}
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{}); !errors.Is(err, spec.ErrNeedsEtcd) {
		t.Errorf("Run: %v, want ErrNeedsEtcd", err)
	}
	if _, err := harness.NewSim(sc, history.Fenced); !errors.Is(err, spec.ErrNeedsEtcd) {
		t.Errorf("NewSim: %v, want ErrNeedsEtcd", err)
	}
	sc.Faults = nil // the size alone is the real backend's business
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{}); err != nil {
		t.Errorf("Run with etcd.members alone: %v", err)
	}
}

// A lock under test keeps its own time on its own server: New refuses a
// drift of the lab coordinator's clock for it, naming the scenario's
// field, and plays it for the lab's own coordinator.
func TestCoordinatorDriftRefusedForALock(t *testing.T) {
	sc := short(t, "overlap", 2*time.Second, 1)
	sc.Clocks.CoordinatorDriftPPM = -100000
	lock := &realtime.Contender{Info: history.Contender{Name: "lock"}}
	_, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{"lock"}, Backend: lock})
	if !errors.Is(err, registry.ErrContender) || !strings.Contains(err.Error(), "contender lock: cannot play the lab coordinator's clock drift") ||
		!strings.Contains(err.Error(), "clocks.coordinator_drift_ppm") {
		t.Errorf("New with a Contender: %v, want the lock refused, naming clocks.coordinator_drift_ppm", err)
	}
	_, err = realtime.New(sc, realtime.Options{Contenders: map[history.Mode]*realtime.Contender{history.Naive: lock}})
	if !errors.Is(err, registry.ErrContender) {
		t.Errorf("New with a Contender for one mode: %v, want it refused", err)
	}
	if _, err := realtime.New(sc, realtime.Options{}); err != nil {
		t.Errorf("New on the lab's own coordinator: %v", err)
	}
}
