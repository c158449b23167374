package harness

import (
	"context"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// SweepLockDelay runs sc on the simulator once per lock-delay in delays
// and seed from sc.Seed to sc.Seed+seeds-1, in modes (the lab's naive and
// fenced if none), and returns a row per delay. The counts are each
// report's own: the sweep adds them up and judges nothing.
func SweepLockDelay(ctx context.Context, sc spec.Scenario, delays []time.Duration, seeds int, modes ...history.Mode) ([]history.LockDelayRow, error) {
	rows := make([]history.LockDelayRow, 0, len(delays))
	for _, d := range delays {
		row := history.LockDelayRow{LockDelay: d, DelayMS: d.Milliseconds(), Modes: make(map[history.Mode]history.LockDelayCounts)}
		for i := range seeds {
			run := sc
			run.LockDelay, run.Seed = d, sc.Seed+uint64(i)
			res, err := Run(ctx, run, RunOptions{Modes: modes})
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
