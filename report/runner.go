package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/leasefence/lab/history"
)

// Runner says which runner made the history a report is of: its Backend
// (the history header's: sim, memory, etcd) and, for a real-time run that
// just happened, what only that run knows of itself. A report of a history
// file has Backend alone, and is otherwise the same report.
type Runner struct {
	Backend string `json:"backend"`
	// Real is a real-time run's own figures; nil for the simulator and
	// for a history file.
	Real *RealFigures `json:"real,omitempty"`
}

// RealFigures are what a real-time run reports beyond the checker's
// verdict: where it ran and how long it took on the wall clock.
type RealFigures struct {
	// Where names the backend and how it ran, e.g. "etcd (embedded, 1
	// member, min ttl 1s)".
	Where string `json:"where"`
	// Resource is where the gates lived: memory, sqlite or etcd.
	Resource  string  `json:"resource"`
	WallMS    int64   `json:"wall_ms"`
	TimeScale float64 `json:"time_scale"` // every time of the scenario was multiplied by it
	// Faults counts what the fault layer between agents and coordinator
	// did, over every agent and mode.
	Faults FaultCounts `json:"faults"`
	// Agents is how the agents ran: "in-process" (goroutines) or
	// "process" (each an OS process of its own, one per agent and mode).
	Agents string `json:"agents,omitempty"`
	// Processes count, per mode, what the processes went through, when
	// the agents were processes.
	Processes map[history.Mode]ProcessCounts `json:"processes,omitempty"`
}

// ProcessCounts are what one mode's agent processes went through: started
// (a killed agent's new process included), paused by SIGSTOP for a stall,
// killed by SIGKILL.
type ProcessCounts struct {
	Started int `json:"started"`
	Paused  int `json:"processes_paused"`
	Killed  int `json:"processes_killed"`
}

// FaultCounts are a fault layer's counts of calls.
type FaultCounts struct {
	Calls           int64 `json:"calls"`
	RequestsDropped int64 `json:"requests_dropped"` // including those cut by a partition
	Partitioned     int64 `json:"partitioned"`
	Duplicated      int64 `json:"duplicated"`
	RepliesDropped  int64 `json:"replies_dropped"`
}

func (r Runner) real() bool { return !history.Simulated(r.Backend) }

// timeKind names the time a history is in: virtual for the simulator,
// true (wall-clock) time for a real-time run.
func (r Runner) timeKind() string {
	if r.real() {
		return "true"
	}
	return "virtual"
}

// write writes the report's backend lines, and the faults the run played
// on its servers as res's histories record them; the simulator's report
// has none.
func (r Runner) write(w io.Writer, res *history.Result) {
	if !r.real() {
		return
	}
	if r.Real == nil {
		fmt.Fprintf(w, "backend %s: a real-time run; times are wall-clock time since it began\n", r.Backend)
		writeFaultsOnServers(w, res)
		return
	}
	x := r.Real
	fmt.Fprintf(w, "backend %s · resource %s · %s of wall time at time scale %.4gx\n", x.Where, x.Resource,
		history.FormatDuration(time.Duration(x.WallMS)*time.Millisecond), x.TimeScale)
	fmt.Fprintf(w, "fault layer: %s, %s dropped (%d cut by a partition), %s dropped, %d duplicated\n",
		history.Plural(x.Faults.Calls, "call", "calls"), history.Plural(x.Faults.RequestsDropped, "request", "requests"),
		x.Faults.Partitioned, history.Plural(x.Faults.RepliesDropped, "reply", "replies"), x.Faults.Duplicated)
	writeFaultsOnServers(w, res)
	if len(x.Processes) == 0 {
		return
	}
	fmt.Fprintf(w, "agents as processes:")
	for i, m := range slices.Sorted(maps.Keys(x.Processes)) {
		p := x.Processes[m]
		fmt.Fprintf(w, "%s %s %s started, %d paused (SIGSTOP), %d killed (SIGKILL)", map[bool]string{true: ";"}[i > 0], m,
			history.Plural(p.Started, "process", "processes"), p.Paused, p.Killed)
	}
	fmt.Fprintln(w)
}

// writeFaultsOnServers writes one line per fault on a server, from each
// mode's fault events: once for a fault every mode's history records
// alike (one fault of the backend's), and under its mode's name for a
// fault of one mode's (a contender's server restarted).
func writeFaultsOnServers(w io.Writer, res *history.Result) {
	modes := resultModes(res)
	seen := make(map[history.FaultOnServer]int)
	var order []history.FaultOnServer
	for _, m := range modes {
		for _, f := range res.Modes[m].FaultsOnServers {
			if seen[f] == 0 {
				order = append(order, f)
			}
			seen[f]++
		}
	}
	for _, f := range order {
		if seen[f] == len(modes) {
			fmt.Fprintf(w, "fault: %s\n", f)
			continue
		}
		for _, m := range modes {
			if slices.Contains(res.Modes[m].FaultsOnServers, f) {
				fmt.Fprintf(w, "fault (%s): %s\n", m, f)
			}
		}
	}
}
