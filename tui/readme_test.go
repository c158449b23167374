package tui

import (
	"testing"

	"github.com/leasefence/lab/internal/readmetest"
)

// TestReadmeDashboard checks the README's picture of the dashboard is
// what it draws: the default scenario at 100x24 as lab watch opens it,
// run until it paused by itself at the first refused write (fenced; the
// same stale write landed in naive). -update rewrites it.
func TestReadmeDashboard(t *testing.T) {
	m := runToFirstPause(t, newLive(t, "overlap"), 100, 24)
	readmetest.Check(t, "dashboard", m.View(), update())
}
