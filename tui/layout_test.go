package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// paneLines is, for each stacked part of the body, the lines it has and
// the lines its content needs.
func paneLines(m Model) (got, want map[string]int) {
	snap := &m.snaps[m.focus]
	lanes := len(snap.Lanes)
	if m.timeline.perResource {
		lanes = len(snap.Holders)
	}
	got = map[string]int{"holders": m.holders.height, "gates and log": m.log.height, "timeline": m.timeline.height}
	want = map[string]int{"holders": m.holders.lines(), "gates and log": max(gatesLines(snap), m.log.lines()), "timeline": 2 + lanes}
	return got, want
}

// checkLayout fails if a pane is cut while another has lines it does not
// need, or if the footer lost its way to the help.
func checkLayout(t *testing.T, at string, m Model) {
	t.Helper()
	got, want := paneLines(m)
	spare, cut := 0, []string{}
	for name, g := range got {
		if g > want[name] {
			spare += g - want[name]
		}
		if g < want[name] {
			cut = append(cut, fmt.Sprintf("%s (%d of %d lines)", name, g, want[name]))
		}
	}
	if len(cut) > 0 && spare > 0 {
		t.Fatalf("%s: %s cut while %d lines stand spare:\n%s", at, strings.Join(cut, ", "), spare, m.View())
	}
	if m.help.ShowAll {
		if !strings.Contains(m.helpView, "?     help") {
			t.Fatalf("%s: the full help has no ? help:\n%s", at, m.helpView)
		}
		return
	}
	lines := strings.Split(m.View(), "\n")
	footer := lines[len(lines)-1]
	if !strings.Contains(footer, "? help") || !strings.Contains(footer, "q quit") || strings.Contains(footer, "…") {
		t.Fatalf("%s: the footer %q does not end with ? help and q quit, uncut", at, footer)
	}
}

// TestLayoutGivesRoomWhereContentIs plays scenarios frame by frame at
// the smallest, a middling and a large terminal: no pane may be cut while
// another has lines to spare, and "? help" is always in the footer.
func TestLayoutGivesRoomWhereContentIs(t *testing.T) {
	sizes := [][2]int{{80, 24}, {120, 40}, {200, 60}}
	for _, name := range []string{"overlap", "gap", "crowd"} {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s_%dx%d", name, size[0], size[1]), func(t *testing.T) {
				m := settle(t, manual(newLive(t, name)), tea.WindowSizeMsg{Width: size[0], Height: size[1]}, frameMsg{})
				for i := range 80 {
					m = settle(t, m, frame(250*time.Millisecond))
					checkLayout(t, fmt.Sprintf("t=%v", time.Duration(i+1)*250*time.Millisecond), m)
					if i == 40 {
						m = settle(t, m, press("tab")...) // the other mode's panes are sized too
					}
				}
				m = settle(t, m, press("?")...)
				checkLayout(t, "full help", m)
			})
		}
	}
}
