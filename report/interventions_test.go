package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/report"
)

// TestInterruptedReportSaysWhatRan: a run stopped early reports the time
// it ran, not the scenario's, and every intervention made, in text and
// JSON.
func TestInterruptedReportSaysWhatRan(t *testing.T) {
	h := history.Header{Format: history.FormatVersion, Scenario: "overlap", Modes: []history.Mode{history.Fenced},
		TTL: 1e9, Duration: 60 * time.Second, Agents: []string{"agent-1"}, Resources: []string{"res-1"}}
	res := history.Check(h, nil)
	stop := report.Stop{Interrupted: true, At: 3001 * time.Millisecond, By: "the dashboard closed", Interventions: []history.Intervention{
		{At: 1200 * time.Millisecond, Kind: history.StallAgent, Agent: "agent-1", Duration: 2 * time.Second},
		{At: 2500 * time.Millisecond, Kind: history.RestartCoordinator},
		{At: 2600 * time.Millisecond, Kind: history.SetDropRate, Value: 0.25},
	}}
	var b bytes.Buffer
	report.Text(&b, &h, res, stop, report.Runner{Backend: history.Simulator})
	for _, want := range []string{
		"overlap · seed 0 · 3.001s (of 60.000s) of virtual time",
		"INTERRUPTED at 3.001s of virtual time",
		"3 interventions made while it ran:\n",
		"      1.200s  stalled agent-1 for 2.000s\n",
		"      2.500s  restarted the coordinator, losing its fence counter\n",
		"      2.600s  set the drop rate to 0.25\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, &b)
		}
	}
	if strings.Contains(b.String(), "60.000s of virtual time") {
		t.Errorf("the report claims the whole run:\n%s", &b)
	}

	b.Reset()
	if err := report.JSON(&b, res, stop, report.Runner{Backend: history.Simulator}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Verdict       string                 `json:"verdict"`
		Interventions []history.Intervention `json:"interventions"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// Stopped before any write: nothing held, nothing was tested.
	if got.Verdict != report.VerdictVacuous || len(got.Interventions) != 3 {
		t.Errorf("JSON verdict %q with %d interventions, want vacuous and 3", got.Verdict, len(got.Interventions))
	}
}

// TestVerdict: broken exactly when the result failed.
func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		violations []string
		want       string
	}{
		{nil, report.VerdictHeld},
		{[]string{"1 stale write landed through the gate"}, report.VerdictBroken},
	} {
		res := &history.Result{Modes: map[history.Mode]*history.Report{history.Fenced: {Violations: tc.violations}}}
		if got := report.Verdict(res); got != tc.want {
			t.Errorf("violations %q: verdict %q, want %q", tc.violations, got, tc.want)
		}
	}
}
