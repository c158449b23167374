package report_test

import (
	"bytes"
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
	failover.Where, failover.PrimaryFaults = "redis (sentinel topology)", []report.PrimaryFault{
		{AtMS: 1500, Fault: "partition_primary", Victim: "redis-0", DurationMS: 4000, Promoted: "redis-2", AfterMS: 2231},
		{AtMS: 7000, Fault: "pause_primary", Victim: "redis-2", DurationMS: 400, Error: "no replica was promoted during the fault"}}
	for _, tc := range []struct {
		name      string
		run       report.Runner
		want, not []string
	}{
		{"sim", report.Runner{Backend: history.Simulator}, []string{"of virtual time"}, []string{"backend", "wall", "seed fixes the choices"}},
		{"file", report.Runner{Backend: "etcd"}, []string{"of true time", "backend etcd: a real-time run", "seed fixes the choices"}, []string{"fault layer"}},
		{"run", report.Runner{Backend: "etcd", Real: real}, []string{
			"backend etcd (embedded, 1 member, min ttl 1s) · resource etcd · 15.001s of wall time at time scale 1x\n",
			"fault layer: 10 calls, 2 requests dropped (1 cut by a partition), 4 replies dropped, 3 duplicated\n",
		}, []string{"agents as processes"}},
		{"failover", report.Runner{Backend: "redis", Real: &failover}, []string{
			"redis fault at 1.500s: partition_primary of redis-0 for 4.000s, redis-2 promoted 2.231s after\n",
			"redis fault at 7.000s: pause_primary of redis-2 for 400ms: no replica was promoted during the fault\n",
		}, nil},
		{"processes", report.Runner{Backend: "etcd", Real: &procs}, []string{
			"agents as processes: fenced 5 processes started, 7 paused (SIGSTOP), 1 killed (SIGKILL); naive 4 processes started, 9 paused (SIGSTOP), 0 killed (SIGKILL)\n",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			if got.Backend != tc.run.Backend || (got.Real == nil) != (tc.run.Real == nil) || (got.Real != nil && !sameFigures(*got.Real, *tc.run.Real)) {
				t.Errorf("JSON backend %q real %+v, want %q %+v", got.Backend, got.Real, tc.run.Backend, tc.run.Real)
			}
		})
	}
}

// sameFigures compares two runs' figures, an empty list of member or
// primary faults being the same as none.
func sameFigures(a, b report.RealFigures) bool {
	if len(a.MemberFaults) == 0 && len(b.MemberFaults) == 0 {
		a.MemberFaults, b.MemberFaults = nil, nil
	}
	if len(a.PrimaryFaults) == 0 && len(b.PrimaryFaults) == 0 {
		a.PrimaryFaults, b.PrimaryFaults = nil, nil
	}
	return reflect.DeepEqual(a, b)
}
