package tui

import (
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/leasefence/lab/harness"
)

// realTimeLive stands for a real-time run (realtime.Live) with the
// simulator underneath, so that the test, not the wall clock, decides when
// time passes: it advances the embedded Live itself. Like a real-time run,
// it cannot pause, step, advance or change pace at the dashboard's asking.
type realTimeLive struct{ *harness.Live }

func (realTimeLive) RealTime() bool        { return true }
func (realTimeLive) Paused() bool          { return false }
func (realTimeLive) SetPaused(bool)        {}
func (realTimeLive) Step() bool            { return false }
func (realTimeLive) Advance(time.Duration) {}
func (realTimeLive) SetSpeed(x float64) error {
	if x == 1 {
		return nil
	}
	return errors.New("not in a real-time run: time runs at 1x")
}

// passes moves the run's time on by d, as the wall clock would, then
// delivers the frame the ticker would.
func passes(t *testing.T, m Model, src realTimeLive, d time.Duration) Model {
	t.Helper()
	src.Live.Advance(d)
	return settle(t, m, frameMsg{})
}

// TestRealTimeSpaceFreezesTheView: a real-time run cannot pause (its lock
// servers keep their own time), so space freezes the picture, says so,
// and leaves the run going; space again shows the run as it is, with the
// interval it went on unwatched marked under the lanes.
func TestRealTimeSpaceFreezesTheView(t *testing.T) {
	live := newLive(t, "overlap")
	src := realTimeLive{live}
	m := New(src, Options{})
	m.manual = true
	m = settle(t, m, tea.WindowSizeMsg{Width: 100, Height: 30})
	m = passes(t, m, src, 1500*time.Millisecond)

	m = settle(t, m, press("space")...)
	if !m.frozen || !strings.Contains(m.status, "a real-time run cannot pause") {
		t.Fatalf("space: frozen %v, status %q; want the view frozen and the reason said", m.frozen, m.status)
	}
	m = passes(t, m, src, 6*time.Second)
	if got := m.snaps[m.focus].Now; got != 1500*time.Millisecond {
		t.Errorf("the frozen view moved to %v, want it held at 1.500s", got)
	}
	if got := live.Now(); got != 7500*time.Millisecond {
		t.Errorf("the run is at %v, want 7.500s: freezing the view must not hold the run", got)
	}
	view := m.View()
	for _, want := range []string{"FROZEN  t 1.500s · run 7.500s / 60.000s", "space freeze view/live"} {
		if !strings.Contains(view, want) {
			t.Errorf("the frozen view lacks %q:\n%s", want, view)
		}
	}
	for _, refused := range []string{"step one event", "faster x2"} {
		if strings.Contains(view, refused) {
			t.Errorf("the help offers %q, which a real-time run refuses:\n%s", refused, view)
		}
	}
	requireGolden(t, "realtime_frozen", view)

	// The rows are those of 1.500s: a stall from them could hit an agent
	// that has let go since.
	if m = settle(t, m, press("s")...); !m.statusErr || !strings.Contains(m.status, "the view is frozen") {
		t.Errorf("s on a frozen view: %q", m.status)
	}
	if m = settle(t, m, press("n")...); !m.statusErr || !strings.Contains(m.status, "a real-time run cannot step") {
		t.Errorf("n: %q", m.status)
	}

	m = settle(t, m, press("space")...)
	if m.frozen || m.snaps[m.focus].Now != 7500*time.Millisecond {
		t.Fatalf("space again: frozen %v at %v, want the live view at 7.500s", m.frozen, m.snaps[m.focus].Now)
	}
	if !strings.Contains(m.status, "the run went on 1.500s-7.500s while the view was frozen") {
		t.Errorf("status %q", m.status)
	}
	view = m.View()
	if !strings.Contains(view, "RUNNING  t 7.500s") || !strings.Contains(view, "= view frozen") {
		t.Errorf("the live view does not say it runs, or does not mark the frozen interval:\n%s", view)
	}
	requireGolden(t, "realtime_live_again", view)
	checkLayout(t, "live again", m)
}

// TestRealTimeFreezesAtFirstRefusal: what pauses the simulator at the
// first refusal freezes a real-time run's picture there, and the run goes
// on behind it.
func TestRealTimeFreezesAtFirstRefusal(t *testing.T) {
	live := newLive(t, "overlap")
	src := realTimeLive{live}
	m := New(src, Options{PauseAtFirstRefusal: true})
	m.manual = true
	m = settle(t, m, tea.WindowSizeMsg{Width: 100, Height: 30}, frameMsg{})
	if !strings.Contains(m.View(), "the view freezes there by itself (a real-time run goes on)") {
		t.Errorf("before the refusal, the status line does not say what will happen:\n%s", m.View())
	}
	for !m.frozen && !m.done {
		m = passes(t, m, src, 50*time.Millisecond)
	}
	snap := m.snaps[m.focus]
	if !m.frozen || len(snap.Refusals) != 1 {
		t.Fatalf("frozen %v with %d refusals, want frozen at the first", m.frozen, len(snap.Refusals))
	}
	if lag := snap.Now - snap.Refusals[0].At; lag < 0 || lag > 50*time.Millisecond {
		t.Errorf("froze %v after the refusal, want within a frame", lag)
	}
	if !strings.HasPrefix(m.status, "view frozen at the first refusal (the run goes on) · space: live view · ") {
		t.Errorf("status %q", m.status)
	}
	at := live.Now()
	m = passes(t, m, src, 2*time.Second)
	if m.snaps[m.focus].Now != snap.Now || live.Now() != at+2*time.Second || m.paused {
		t.Errorf("after 2s: the picture at %v (want %v), the run at %v (want %v), paused %v",
			m.snaps[m.focus].Now, snap.Now, live.Now(), at+2*time.Second, m.paused)
	}
}
