package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/tui"
)

// lab watch --backend on a terminal shows the real-time run in the
// dashboard: its snapshots are the run's; space freezes the picture and
// never holds the run (its lock servers keep their own time); q ends the
// run; the report of what ran follows, and nothing is left behind.
func TestWatchRealBackend(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"memory", []string{"watch", "overlap", "--backend", "memory", "--time-scale", "0.1"}},
		{"etcd", []string{"watch", "overlap", "--backend", "etcd", "--resource", "sqlite"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "etcd" && testing.Short() {
				t.Skip("starts etcd")
			}
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			a, stdout, stderr := testApp()
			a.stdoutTTY = true
			var heldByPause bool
			var snap, later liveview.Snapshot
			a.dashboard = func(ctx context.Context, live tui.Source) error {
				if _, ok := live.(*realtime.Live); !ok {
					t.Errorf("the dashboard got a %T, want a *realtime.Live", live)
				}
				in, keys := io.Pipe()
				go func() {
					time.Sleep(1500 * time.Millisecond)
					keys.Write([]byte(" "))
					time.Sleep(300 * time.Millisecond)
					heldByPause = live.Paused()
					snap, _ = live.Snapshot(history.Fenced)
					time.Sleep(time.Second)
					later, _ = live.Snapshot(history.Fenced)
					if err := live.Intervene(history.Intervention{Kind: history.StallAgent, Agent: "agent-1", Duration: 500 * time.Millisecond}); err != nil {
						t.Error(err)
					}
					keys.Write([]byte("q"))
				}()
				return tui.Run(ctx, live, tui.Options{}, tea.WithInput(in), tea.WithOutput(io.Discard))
			}
			code := a.main(t.Context(), tc.args)
			if code != exitOK {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if heldByPause {
				t.Error("space paused the run: a real-time run goes on, the dashboard freezes its picture")
			}
			// While the picture is frozen, the run hands the lease on as
			// before: a second of it at a tenth of the scenario's times
			// (TTL 100ms) is several grants.
			if got := later.Totals.Acquisitions - snap.Totals.Acquisitions; tc.name == "memory" && got < 2 {
				t.Errorf("%d leases granted in the second after space, want several: the run was held", got)
			}
			if snap.Now <= 0 || len(snap.Agents) != 4 || len(snap.Holders) != 1 || len(snap.Gates) != 1 || len(snap.Lanes) != 4 {
				t.Errorf("snapshot: now %v, %d agents, %d holders, %d gates, %d lanes", snap.Now, len(snap.Agents), len(snap.Holders), len(snap.Gates), len(snap.Lanes))
			}
			out := stdout.String()
			if !strings.Contains(out, "backend "+tc.name) || !strings.Contains(out, "INTERRUPTED at ") {
				t.Errorf("the report of what ran is missing:\n%s", out)
			}
			if !strings.Contains(out, "1 intervention made while it ran:\n") || !strings.Contains(out, "stalled agent-1 for 500ms\n") {
				t.Errorf("the report does not list the stall made from the dashboard:\n%s", out)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
				t.Errorf("left behind in TMPDIR: %v", entries)
			}
		})
	}
}
