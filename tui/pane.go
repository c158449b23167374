package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/leasefence/lab/history"
)

// pane is one part of the screen, in the manner of soft-serve's
// components: the model gives it a size and it draws exactly that much.
// Panes do their formatting when the data or the size changes, so View
// only joins strings that are already built.
type pane interface {
	SetSize(width, height int)
	View() string
}

var (
	_ pane = (*headerPane)(nil)
	_ pane = (*stripPane)(nil)
	_ pane = (*holdersPane)(nil)
	_ pane = (*gatesPane)(nil)
	_ pane = (*logPane)(nil)
	_ pane = (*timelinePane)(nil)
)

// selection is the row the person picked: an agent, or a resource when it
// has no holder. It follows the agent when its row moves (a holder that
// becomes believes-expired, or takes another resource, keeps its
// selection); while the agent is on no row the cursor rests on the
// resource's first row, and the selection is still the agent, never the
// row's new holder. chosen is false until the person moves the cursor.
type selection struct {
	res    int // resource index
	agent  string
	chosen bool
}

// window is the first index of a scrolled list of n items showing rows of
// them, so that item sel is visible and, when the list is longer, roughly
// centred.
func window(n, rows, sel int) int {
	if n <= rows || rows <= 0 {
		return 0
	}
	return min(max(sel-rows/2, 0), n-rows)
}

// titled puts a pane title above body.
func titled(title, body string) string {
	return title + "\n" + body
}

// renderLines styles each line on its own: lipgloss pads a multi-line
// block to its widest line, which would push whatever follows sideways.
func renderLines(style lipgloss.Style, lines ...string) string {
	for i, l := range lines {
		lines[i] = style.Render(l)
	}
	return strings.Join(lines, "\n")
}

// stateWord is a state as the holders table says it: the glyph and a word,
// so it reads without colour.
func stateWord(s history.AgentState) string {
	switch s {
	case history.AgentHolding:
		return "# live"
	case history.AgentStalled:
		return "~ stalled"
	case history.AgentZombie:
		return "! thinks it holds"
	case history.AgentWaiting:
		return "? waiting"
	}
	return ". idle"
}

// padRight pads s with spaces to n bytes (ASCII only).
func padRight(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(" ", n-len(s))
}
