package harness

import (
	"context"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// SweepRun runs one scenario of a sweep and returns its verdict.
type SweepRun func(ctx context.Context, sc spec.Scenario) (*history.Result, error)

// SweepLockDelay runs sc once per lock-delay in delays and seed from
// sc.Seed to sc.Seed+seeds-1, each by run (nil: on the simulator, in the
// lab's naive and fenced modes; a real backend's run plays it in real
// time), and returns a row per delay. The counts are each report's own:
// the sweep adds them up and judges nothing.
func SweepLockDelay(ctx context.Context, sc spec.Scenario, delays []time.Duration, seeds int, run SweepRun) ([]history.LockDelayRow, error) {
	if run == nil {
		run = func(ctx context.Context, sc spec.Scenario) (*history.Result, error) {
			return Run(ctx, sc, RunOptions{})
		}
	}
	rows := make([]history.LockDelayRow, 0, len(delays))
	for _, d := range delays {
		row := history.LockDelayRow{LockDelay: d, DelayMS: d.Milliseconds(), Modes: make(map[history.Mode]history.LockDelayCounts)}
		for i := range seeds {
			sc := sc
			sc.LockDelay, sc.Seed = d, sc.Seed+uint64(i)
			res, err := run(ctx, sc)
			if err != nil {
				return nil, err
			}
			for m, rep := range res.Modes {
				c := row.Modes[m]
				c.StaleWritesLanded += rep.StaleWritesLanded
				c.IdleWhileWaitingMS += rep.IdleWhileWaitingMS
				c.CommitsAdmitted += rep.CommitsAdmitted
				row.Modes[m] = c
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
