package history

import "time"

// LockDelayRow is one lock-delay of a sweep: each mode's counts, summed
// over the sweep's seeds.
type LockDelayRow struct {
	LockDelay time.Duration            `json:"-"`
	DelayMS   int64                    `json:"lock_delay_ms"`
	Modes     map[Mode]LockDelayCounts `json:"modes"`
}

// LockDelayCounts are what a lock-delay buys and costs in one mode: the
// stale writes that landed, the time resources sat idle while someone
// waited (Report's IdleWhileWaitingMS), and the writes that
// landed at all (the work done).
type LockDelayCounts struct {
	StaleWritesLanded  int `json:"stale_writes_landed"`
	IdleWhileWaitingMS int `json:"idle_while_waiting_ms"`
	CommitsAdmitted    int `json:"commits_admitted"`
}
