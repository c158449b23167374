package report

import (
	"fmt"
	"io"
	"time"

	"github.com/leasefence/lab/history"
)

// LockDelayTable writes a lock-delay sweep (the harness's SweepLockDelay) as
// one table: a row per lock-delay, and for naive (a resource that cannot
// check a fence: every write lands) and fenced the stale writes that
// landed, the idle time while someone waited, and the writes that landed,
// each summed over the seeds.
func LockDelayTable(w io.Writer, scenario string, seeds int, runFor time.Duration, rows []history.LockDelayRow) {
	w = history.PrintableWriter(w)
	fmt.Fprintf(w, "%s · lock-delay sweep · %s of %s each, counts summed\n\n", scenario,
		history.Plural(seeds, "seed", "seeds"), history.FormatDuration(runFor))
	fmt.Fprintf(w, "  %-10s  %-36s  %s\n", "", "naive (the resource cannot check)", "fenced (the gate checks)")
	fmt.Fprintf(w, "  %-10s  %6s %10s %8s  %9s  %6s %10s %8s\n", "lock-delay", "stale", "idle", "writes", "", "stale", "idle", "writes")
	for _, r := range rows {
		n, f := r.Modes[history.Naive], r.Modes[history.Fenced]
		fmt.Fprintf(w, "  %-10s  %6d %10s %8d  %9s  %6d %10s %8d\n", r.LockDelay,
			n.StaleWritesLanded, idle(n.IdleWhileWaitingMS), n.CommitsAdmitted, "",
			f.StaleWritesLanded, idle(f.IdleWhileWaitingMS), f.CommitsAdmitted)
	}
	fmt.Fprint(w, `
stale: writes that landed after a newer lease's write (stale_writes_landed).
idle: how long the resource sat with no live lease while an acquirer the
coordinator refused for lock-delay waited (idle_while_waiting_ms).
writes: the writes that landed (commits_admitted): the work done.
`)
}

func idle(ms int) string {
	return history.FormatDuration(time.Duration(ms) * time.Millisecond)
}
