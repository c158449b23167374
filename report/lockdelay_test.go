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

// The sweep's page has the table's rows and a plot with a point per
// lock-delay: the naive stale writes fall from the top to the axis, the
// idle time rises from the axis to the top.
func TestLockDelayHTML(t *testing.T) {
	rows := []history.LockDelayRow{
		{LockDelay: 0, Modes: map[history.Mode]history.LockDelayCounts{history.Naive: {StaleWritesLanded: 10}}},
		{LockDelay: time.Second, Modes: map[history.Mode]history.LockDelayCounts{history.Naive: {IdleWhileWaitingMS: 5000}}},
	}
	var b strings.Builder
	if err := report.LockDelayHTML(&b, "lock-delay", 1, time.Minute, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<td>0s</td><td>10</td><td>0ms</td>`,
		`<td>1s</td><td>0</td><td>5.000s</td>`,
		`<polyline class="stale" points="30.0,30.0 530.0,190.0 "/>`,
		`<polyline class="idle" points="30.0,190.0 530.0,30.0 "/>`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
