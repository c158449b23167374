package report

import (
	"fmt"
	"io"
	"time"

	"github.com/leasefence/lab/history"
)

// MemberFault is an etcd member fault a real-time run played: what, to
// which member, when and for how long.
type MemberFault struct {
	AtMS int64 `json:"at_ms"`
	// Fault is its kind, as a scenario's etcd.faults spells it:
	// "partition_member" (cut off from the other members and the
	// clients, or with DelayMS its traffic held back that long),
	// "pause_member" or "pause_leader" (SIGSTOP).
	Fault      string `json:"fault"`
	Member     int    `json:"member"` // from 1
	Leader     bool   `json:"leader"` // it led the cluster when the fault began
	DurationMS int64  `json:"duration_ms"`
	DelayMS    int64  `json:"delay_ms,omitempty"`
	// Error says why the fault could not be played.
	Error string `json:"error,omitempty"`
}

// writeMemberFaults writes one line per member fault.
func writeMemberFaults(w io.Writer, faults []MemberFault) {
	ms := func(n int64) string { return history.FormatDuration(time.Duration(n) * time.Millisecond) }
	for _, f := range faults {
		who := fmt.Sprintf("member %d", f.Member)
		if f.Leader {
			who += " (the leader)"
		}
		what := "paused " + who + " with SIGSTOP"
		switch {
		case f.DelayMS > 0:
			what = "delayed the traffic of " + who + " by " + ms(f.DelayMS)
		case f.Fault == "partition_member":
			what = "cut " + who + " off from the other members and the clients"
		}
		line := fmt.Sprintf("etcd member fault at %s: %s for %s", ms(f.AtMS), what, ms(f.DurationMS))
		if f.Error != "" {
			line = fmt.Sprintf("etcd member fault at %s: %s %s", ms(f.AtMS), f.Fault, f.Error)
		}
		fmt.Fprintln(w, line)
	}
}

// PrimaryFault is a fault of the Redis primary a real-time run played on
// the sentinel topology: what, to which server, when and for how long,
// and the failover it caused.
type PrimaryFault struct {
	AtMS int64 `json:"at_ms"`
	// Fault is its kind, as a scenario's redis.faults spells it:
	// "pause_primary", "kill_primary" or "partition_primary".
	Fault      string `json:"fault"`
	Victim     string `json:"victim"`
	DurationMS int64  `json:"duration_ms"`
	// Promoted is the replica the Sentinels promoted, AfterMS after the
	// fault began ("" and 0 if none was).
	Promoted string `json:"promoted,omitempty"`
	AfterMS  int64  `json:"after_ms,omitempty"`
	// Error says why the fault could not be played, saw no failover, or
	// did not bring the old primary back as a replica.
	Error string `json:"error,omitempty"`
}

// writePrimaryFaults writes one line per fault of the Redis primary.
func writePrimaryFaults(w io.Writer, faults []PrimaryFault) {
	ms := func(n int64) string { return history.FormatDuration(time.Duration(n) * time.Millisecond) }
	for _, f := range faults {
		line := fmt.Sprintf("redis fault at %s: %s of %s for %s", ms(f.AtMS), f.Fault, f.Victim, ms(f.DurationMS))
		if f.Promoted != "" {
			line += fmt.Sprintf(", %s promoted %s after", f.Promoted, ms(f.AfterMS))
		}
		if f.Error != "" {
			line += ": " + f.Error
		}
		fmt.Fprintln(w, line)
	}
}
