package realtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
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
	sc.Etcd = spec.Etcd{Members: 3, Faults: []spec.MemberFault{{At: time.Second, Do: spec.FaultPauseLeader, Duration: time.Second}}}
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{}); !errors.Is(err, spec.ErrNeedsEtcd) {
		t.Errorf("Run: %v, want ErrNeedsEtcd", err)
	}
	if _, err := harness.NewSim(sc, history.Fenced); !errors.Is(err, spec.ErrNeedsEtcd) {
		t.Errorf("NewSim: %v, want ErrNeedsEtcd", err)
	}
	sc.Etcd.Faults = nil // the size alone is the real backend's business
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{}); err != nil {
		t.Errorf("Run with etcd.members alone: %v", err)
	}
}
