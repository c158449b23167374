package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/tui"
)

// TestWatchReportAfterQuit: quitting the dashboard early leaves a report
// of the time that ran, not the scenario's, listing every intervention.
func TestWatchReportAfterQuit(t *testing.T) {
	a, stdout, stderr := testApp()
	a.stdoutTTY = true
	a.dashboard = func(ctx context.Context, live tui.Source) error {
		live.SetPaused(true)
		live.Advance(1200 * time.Millisecond)
		if err := live.Intervene(history.Intervention{Kind: history.StallAgent, Agent: "agent-2", Duration: 2 * time.Second}); err != nil {
			t.Error(err)
		}
		live.Advance(1801 * time.Millisecond)
		if err := live.Intervene(history.Intervention{Kind: history.RestartCoordinator, Persist: true}); err != nil {
			t.Error(err)
		}
		return nil // q
	}
	if code := a.main(t.Context(), []string{"watch", "overlap"}); code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	out := stdout.String()
	for _, want := range []string{
		"overlap · seed 1 · 3.001s (of 60.000s) of virtual time",
		"INTERRUPTED at 3.001s of virtual time",
		"2 interventions made while it ran:\n",
		"      1.200s  stalled agent-2 for 2.000s\n",
		"      3.001s  restarted the coordinator, keeping its fence counter\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the report:\n%s", want, out)
		}
	}
}
