package harness_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// Over five seeds of the built-in lock-delay, a longer lock-delay lands
// fewer stale writes where the resource cannot check a fence (naive), at a
// cost in idle time that grows with it; a fence lands none at any delay.
func TestSweepLockDelayDirection(t *testing.T) {
	delays := []time.Duration{0, time.Second, 4 * time.Second}
	rows, err := harness.SweepLockDelay(t.Context(), spec.LockDelayScenario(), delays, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		naive, fenced := r.Modes[history.Naive], r.Modes[history.Fenced]
		t.Logf("lock-delay %v: naive %+v, fenced %+v", r.LockDelay, naive, fenced)
		if fenced.StaleWritesLanded != 0 {
			t.Errorf("lock-delay %v: fenced landed %d stale writes", r.LockDelay, fenced.StaleWritesLanded)
		}
		if i == 0 {
			if naive.IdleWhileWaitingMS != 0 {
				t.Errorf("no lock-delay, yet %dms idle", naive.IdleWhileWaitingMS)
			}
			continue
		}
		prev := rows[i-1].Modes[history.Naive]
		if 2*naive.StaleWritesLanded >= prev.StaleWritesLanded {
			t.Errorf("lock-delay %v: %d stale writes, not under half the %d of %v", r.LockDelay, naive.StaleWritesLanded,
				prev.StaleWritesLanded, rows[i-1].LockDelay)
		}
		if naive.IdleWhileWaitingMS < prev.IdleWhileWaitingMS+10_000 {
			t.Errorf("lock-delay %v: %dms idle, not 10s above the %dms of %v", r.LockDelay, naive.IdleWhileWaitingMS,
				prev.IdleWhileWaitingMS, rows[i-1].LockDelay)
		}
	}
}
