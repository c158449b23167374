package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/leasefence/lab/spec"
)

// A scenario's name from a file cannot drive the terminal the dashboard
// draws on: its control characters are drawn escaped.
func TestDashboardEscapesTheScenarioName(t *testing.T) {
	live := newLive(t, "gap", func(sc *spec.Scenario) { sc.Name = "evil\x1b[2Jname" })
	m := settle(t, manual(live), tea.WindowSizeMsg{Width: 120, Height: 40}, frame(0))
	view := m.View()
	if strings.Contains(view, "\x1b[2J") {
		t.Fatalf("the view holds the name's raw escape")
	}
	if !strings.Contains(view, `evil\x1b[2Jname`) {
		t.Errorf("the view does not show the name escaped:\n%s", view)
	}
}
