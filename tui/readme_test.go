package tui

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/leasefence/lab/internal/readmetest"
)

// TestReadmeDashboard checks the README's picture of the dashboard is
// what it draws: the default scenario at 100x24, paused soon after the
// first stale write was refused (fenced) and landed (naive). -update
// rewrites it.
func TestReadmeDashboard(t *testing.T) {
	live := newLive(t, "overlap")
	live.Advance(3151 * time.Millisecond)
	m := settle(t, manual(live), tea.WindowSizeMsg{Width: 100, Height: 24}, frameMsg{})
	m = settle(t, m, press("space")...)
	readmetest.Check(t, "dashboard", m.View(), update())
}
