package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// threeContenders is a simulated run shown as three contenders: the
// lab's naive and fenced, and "redsync", which shows the naive mode's
// snapshot under its own name, as a library contender beside them would.
type threeContenders struct{ *harness.Live }

func (s threeContenders) Header() history.Header {
	h := s.Live.Header()
	h.Modes = append(h.Modes, "redsync")
	h.Contenders = []history.Contender{{Name: "redsync", Library: "github.com/go-redsync/redsync/v4", Discipline: history.DisciplineNaive}}
	return h
}

func (s threeContenders) Modes() []history.Mode { return s.Header().Modes }

func (s threeContenders) Snapshot(m history.Mode) (liveview.Snapshot, bool) {
	if m != "redsync" {
		return s.Live.Snapshot(m)
	}
	snap, ok := s.Live.Snapshot(history.Naive)
	snap.Mode = m
	return snap, ok
}

// With more than two contenders, tab cycles through every one, and the
// strip compares the one in view with the one c picks, any two of them.
func TestStripComparesAnyTwoContenders(t *testing.T) {
	live := newLive(t, "gap")
	live.Advance(1500 * time.Millisecond)
	m := New(threeContenders{live}, Options{})
	m.manual = true
	m = settle(t, m, tea.WindowSizeMsg{Width: 200, Height: 40}, frameMsg{})
	strip := func() string { return strings.TrimSpace(m.strip.View()) }
	// In view: fenced, the one with something to show; beside it, naive.
	if got := strip(); !strings.HasPrefix(got, "stale writes  naive: 1 landed, 0 refused (no gate)  vs  fenced: 0 landed, 1 refused  (same faults)") ||
		!strings.Contains(got, "c: compare another") {
		t.Fatalf("the first comparison: %q", got)
	}
	m = settle(t, m, press("c")...)
	if got := strip(); !strings.HasPrefix(got, "stale writes  redsync: 1 landed, 0 refused (no gate)  vs  fenced: 0 landed, 1 refused") {
		t.Errorf("c compares fenced with redsync: %q", got)
	}
	if !strings.Contains(m.status, "comparing fenced with redsync") {
		t.Errorf("status %q", m.status)
	}
	// c again comes round to naive, never to the one in view.
	m = settle(t, m, press("c")...)
	if got := strip(); !strings.HasPrefix(got, "stale writes  naive: ") || strings.Contains(got, "redsync") {
		t.Errorf("c again: %q", got)
	}
	// tab moves the view through every contender; the strip never
	// compares one with itself.
	var seen []history.Mode
	for range 3 {
		m = settle(t, m, press("tab")...)
		seen = append(seen, m.info.modes[m.focus])
		if m.against == m.focus || m.against < 0 {
			t.Fatalf("in view %s, the strip compares it with %d", m.info.modes[m.focus], m.against)
		}
		if got := strip(); strings.Count(got, string(m.info.modes[m.focus])+": ") != 1 {
			t.Errorf("in view %s, the strip does not show it: %q", m.info.modes[m.focus], got)
		}
	}
	if strings.Join(modeNames(seen), ",") != "redsync,naive,fenced" {
		t.Errorf("tab went through %v", seen)
	}
}

func modeNames(ms []history.Mode) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m)
	}
	return out
}

// With the lab's own two, c says there is nothing else to compare.
func TestCompareWithTwoContenders(t *testing.T) {
	live := newLive(t, "gap")
	m := settle(t, manual(live), tea.WindowSizeMsg{Width: 200, Height: 40}, frameMsg{})
	m = settle(t, m, press("c")...)
	if !strings.Contains(m.status, "compares the run's two contenders already") || strings.Contains(m.strip.View(), "compare another") {
		t.Errorf("status %q, strip %q", m.status, m.strip.View())
	}
}
