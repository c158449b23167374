package history

import "time"

// FaultOnServer is one fault a run played on a server rather than an
// agent (the coordinator restarted, an etcd member paused, the Redis
// primary killed; every fault_began with no agent), as its fault_began
// and fault_ended say it, and nothing else: the report's, the JSON's and
// the page's fault lines are these, whichever runner or file the history
// came from.
type FaultOnServer struct {
	AtMS  int64  `json:"at_ms"`
	Fault string `json:"fault"`
	// Target is what it struck ("coordinator", "etcd member 1 (the
	// leader)", "redis primary redis-0").
	Target string `json:"target"`
	// DurationMS is how long it was to last; 0 for an instant.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Detail is the fault_began's: how ("traffic delayed 50ms"), or, for
	// a fault not played, why.
	Detail    string `json:"detail,omitempty"`
	NotPlayed bool   `json:"not_played,omitempty"`
	// EndedMS is when its fault_ended came (-1: the history has none:
	// an instant, one not played, or one the run's end cut), Ended that
	// event's detail: what the fault did ("redis-2 promoted 2.231s
	// after, redis-0 back as its replica").
	EndedMS int64  `json:"ended_at_ms"`
	Ended   string `json:"ended,omitempty"`
	// FailedOver: the fault_ended says the store failed over during it
	// (outcome failed_over).
	FailedOver bool `json:"failed_over,omitempty"`
}

// MaxFaultsOnServers is how many faults on servers a mode's report lists:
// the first ones; FaultsPlayed counts them all.
const MaxFaultsOnServers = 64

// faultLog folds a mode's fault events into its faults on servers.
type faultLog struct {
	list []FaultOnServer
}

func (l *faultLog) add(e *Event) {
	if e.Agent >= 0 {
		return
	}
	switch e.Kind {
	case FaultBegan:
		if len(l.list) == MaxFaultsOnServers {
			return
		}
		l.list = append(l.list, FaultOnServer{AtMS: e.At.Milliseconds(), Fault: e.Fault, Target: e.Target,
			DurationMS: e.Dur.Milliseconds(), Detail: e.Detail, NotPlayed: e.Outcome == OutcomeNotPlayed, EndedMS: -1})
	case FaultEnded:
		// It ends the latest fault of its kind on its target that lasts.
		for i := len(l.list) - 1; i >= 0; i-- {
			f := &l.list[i]
			if f.Fault == e.Fault && f.Target == e.Target && f.EndedMS < 0 && !f.NotPlayed && f.DurationMS > 0 {
				f.EndedMS, f.Ended, f.FailedOver = e.At.Milliseconds(), e.Detail, e.Outcome == OutcomeFailedOver
				return
			}
		}
	}
}

// String is the fault in one line: "pause_leader on etcd member 1 (the
// leader) at 3.003s for 2.500s, ended at 5.504s".
func (f FaultOnServer) String() string {
	ms := func(n int64) string { return FormatDuration(time.Duration(n) * time.Millisecond) }
	s := f.Fault + " on " + f.Target + " at " + ms(f.AtMS)
	if f.NotPlayed {
		return s + ": not played: " + f.Detail
	}
	if f.DurationMS > 0 {
		s += " for " + ms(f.DurationMS)
	}
	if f.Detail != "" {
		s += " (" + f.Detail + ")"
	}
	switch {
	case f.EndedMS >= 0 && f.Ended != "":
		s += ", ended at " + ms(f.EndedMS) + ": " + f.Ended
	case f.EndedMS >= 0:
		s += ", ended at " + ms(f.EndedMS)
	case f.DurationMS > 0:
		s += ", not ended in the history"
	}
	return s
}
