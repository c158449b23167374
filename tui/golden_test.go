package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/leasefence/lab/spec"
)

// requireGolden compares got with testdata/<name>.golden, rewriting the
// file instead under -update.
func requireGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if update() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tui -update to create it)", err)
	}
	if got == string(want) {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s differs from the view at line %d:\nwant %q\ngot  %q\n\nwhole view:\n%s", path, i+1, wl, gl, got)
		}
	}
}

// TestViewGolden draws the dashboard at fixed sizes after advancing the
// Live deterministically; every frame is plain text (TestMain forces the
// ASCII profile), so the goldens are the screens a person would read.
func TestViewGolden(t *testing.T) {
	tests := []struct {
		name     string
		scenario string
		edit     func(*spec.Scenario)
		advance  time.Duration
		w, h     int
		keys     []string
	}{
		// The gap scenario, after agent-1's stale write was refused.
		{name: "gap_after_refusal", scenario: "gap", advance: 1500 * time.Millisecond, w: 100, h: 30},
		{name: "gap_80x24", scenario: "gap", advance: 1500 * time.Millisecond, w: 80, h: 24},
		{name: "gap_naive_view", scenario: "gap", advance: 1500 * time.Millisecond, w: 100, h: 30, keys: []string{"tab"}},
		{name: "help_80x24", scenario: "gap", advance: 1500 * time.Millisecond, w: 80, h: 24, keys: []string{"?"}},
		// 50 agents on 5 resources fold into one lane per resource.
		{name: "crowd_10s", scenario: "crowd", advance: 10 * time.Second, w: 120, h: 40},
		{name: "crowd_80x24", scenario: "crowd", advance: 10 * time.Second, w: 80, h: 24},
		// 1,000 agents: the lists scroll with the selection.
		{name: "crowd_1000_agents", scenario: "crowd", edit: func(sc *spec.Scenario) { sc.Agents, sc.Resources = 1000, 100 },
			advance: 3 * time.Second, w: 100, h: 30, keys: []string{"j", "j", "j", "j", "j", "j", "j", "j", "j", "j", "j", "j"}},
		{name: "crowd_filtered_log", scenario: "crowd", advance: 10 * time.Second, w: 100, h: 30, keys: []string{"f", "f", "f"}},
		{name: "too_small", scenario: "gap", w: 79, h: 24},
		// overlap at 7.1s: two agents believe expired leases, three holder
		// rows; every one is drawn at each size, and the footer keeps ? help.
		{name: "overlap_80x24", scenario: "overlap", advance: 7100 * time.Millisecond, w: 80, h: 24},
		{name: "overlap_120x40", scenario: "overlap", advance: 7100 * time.Millisecond, w: 120, h: 40},
		{name: "overlap_200x60", scenario: "overlap", advance: 7100 * time.Millisecond, w: 200, h: 60},
		// The first second, when there is little to show.
		{name: "overlap_first_second", scenario: "overlap", advance: time.Second, w: 120, h: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edits []func(*spec.Scenario)
			if tt.edit != nil {
				edits = append(edits, tt.edit)
			}
			live := newLive(t, tt.scenario, edits...)
			live.Advance(tt.advance)
			m := settle(t, manual(live), tea.WindowSizeMsg{Width: tt.w, Height: tt.h}, frameMsg{})
			m = settle(t, m, press(tt.keys...)...)
			view := m.View()
			requireGolden(t, tt.name, view)
			if tt.w >= MinWidth {
				checkLayout(t, tt.name, m)
				lines := strings.Split(view, "\n")
				if len(lines) != tt.h {
					t.Errorf("view is %d lines, want the terminal's %d", len(lines), tt.h)
				}
				for i, l := range lines {
					if w := len([]rune(l)); w > tt.w {
						t.Errorf("line %d is %d wide, more than the terminal's %d: %q", i+1, w, tt.w, l)
					}
				}
			}
		})
	}
}
