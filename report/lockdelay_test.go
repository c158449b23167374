package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/report"
)

// The sweep's table has a row per lock-delay with naive's and fenced's
// stale writes, idle time and writes, in that order.
func TestLockDelayTable(t *testing.T) {
	rows := []history.LockDelayRow{
		{LockDelay: 0, Modes: map[history.Mode]history.LockDelayCounts{
			history.Naive:  {StaleWritesLanded: 94, CommitsAdmitted: 1074},
			history.Fenced: {CommitsAdmitted: 985}}},
		{LockDelay: 2 * time.Second, Modes: map[history.Mode]history.LockDelayCounts{
			history.Naive:  {StaleWritesLanded: 8, IdleWhileWaitingMS: 189712, CommitsAdmitted: 724},
			history.Fenced: {IdleWhileWaitingMS: 188736, CommitsAdmitted: 706}}},
	}
	var b strings.Builder
	report.LockDelayTable(&b, "lock-delay", 5, 2*time.Minute, rows)
	for _, want := range []string{
		"lock-delay · lock-delay sweep · 5 seeds of 120.000s each",
		"  0s              94        0ms     1074                  0        0ms      985\n",
		"  2s               8   189.712s      724                  0   188.736s      706\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
