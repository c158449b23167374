package report_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/report"
)

// The report says which runner made the history: nothing more for the
// simulator, the backend for a history file of a real-time run, and the
// run's own figures for the run that just happened.
func TestRunnerLines(t *testing.T) {
	h := history.Header{Format: history.FormatVersion, Scenario: "overlap", Modes: []history.Mode{history.Fenced},
		TTL: 1e9, Agents: []string{"agent-1"}, Resources: []string{"res-1"}}
	res := history.Check(h, nil)
	real := &report.RealFigures{Where: "etcd (embedded, 1 member, min ttl 1s)", Resource: "etcd", WallMS: 15001, TimeScale: 1,
		Faults: report.FaultCounts{Calls: 10, RequestsDropped: 2, Partitioned: 1, Duplicated: 3, RepliesDropped: 4}}
	procs := *real
	procs.Agents, procs.Processes = "process", map[history.Mode]report.ProcessCounts{
		history.Fenced: {Started: 5, Paused: 7, Killed: 1}, history.Naive: {Started: 4, Paused: 9}}
	failover := *real
	failover.Where = "redis (sentinel topology)"
	// The faults on servers are the histories': one the backend's in
	// every mode, one that only the naive mode's history records.
	two := h
	two.Modes = []history.Mode{history.Naive, history.Fenced}
	partition := history.NewFault("partition_primary", -1, "redis primary redis-0", 4e9)
	partition.At = 1500e6
	promoted := partition.Ended()
	promoted.At, promoted.Outcome, promoted.Detail = 5600e6, history.OutcomeFailedOver, "redis-2 promoted 2.231s after, redis-0 back as its replica"
	pause := history.NewFault("pause_primary", -1, "redis primary redis-2", 2e9)
	pause.At = 7000e6
	var events []history.Event
	for _, m := range two.Modes {
		for _, e := range []history.Event{partition, promoted} {
			e.Mode = m
			events = append(events, e)
		}
	}
	pause.Mode = history.Naive
	failed := history.Check(two, append(events, pause))
	for _, tc := range []struct {
		name      string
		run       report.Runner
		res       *history.Result // nil: res
		want, not []string
	}{
		{"sim", report.Runner{Backend: history.Simulator}, nil, []string{"of virtual time"}, []string{"backend", "wall", "seed fixes the choices"}},
		{"file", report.Runner{Backend: "etcd"}, nil, []string{"of true time", "backend etcd: a real-time run", "seed fixes the choices"}, []string{"fault layer"}},
		{"run", report.Runner{Backend: "etcd", Real: real}, nil, []string{
			"backend etcd (embedded, 1 member, min ttl 1s) · resource etcd · 15.001s of wall time at time scale 1x\n",
			"fault layer: 10 calls, 2 requests dropped (1 cut by a partition), 4 replies dropped, 3 duplicated\n",
		}, []string{"agents as processes"}},
		{"failover", report.Runner{Backend: "redis", Real: &failover}, failed, []string{
			"fault: partition_primary on redis primary redis-0 at 1.500s for 4.000s, ended at 5.600s: redis-2 promoted 2.231s after, redis-0 back as its replica\n",
			"fault (naive): pause_primary on redis primary redis-2 at 7.000s for 2.000s, not ended in the history\n",
		}, []string{"fault (fenced)"}},
		{"failover file", report.Runner{Backend: "redis"}, failed, []string{
			"backend redis: a real-time run",
			"fault: partition_primary on redis primary redis-0 at 1.500s for 4.000s, ended at 5.600s",
		}, nil},
		{"processes", report.Runner{Backend: "etcd", Real: &procs}, nil, []string{
			"agents as processes: fenced 5 processes started, 7 paused (SIGSTOP), 1 killed (SIGKILL); naive 4 processes started, 9 paused (SIGSTOP), 0 killed (SIGKILL)\n",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := cmp.Or(tc.res, res)
			var b bytes.Buffer
			report.Text(&b, &h, res, report.Stop{}, tc.run)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("no %q in\n%s", w, &b)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(b.String(), n) {
					t.Errorf("%q in\n%s", n, &b)
				}
			}
			b.Reset()
			if err := report.JSON(&b, res, report.Stop{}, tc.run); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Backend string              `json:"backend"`
				Real    *report.RealFigures `json:"real"`
			}
			if err := json.Unmarshal(b.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Backend != tc.run.Backend || (got.Real == nil) != (tc.run.Real == nil) || (got.Real != nil && !reflect.DeepEqual(*got.Real, *tc.run.Real)) {
				t.Errorf("JSON backend %q real %+v, want %q %+v", got.Backend, got.Real, tc.run.Backend, tc.run.Real)
			}
		})
	}
}
