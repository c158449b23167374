package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// runToFirstPause opens the dashboard that pauses at the first refusal on
// a fresh Live and drives it frame by frame, as the ticker would, until
// it pauses or the run ends.
func runToFirstPause(t *testing.T, live *harness.Live, w, h int) Model {
	t.Helper()
	m := New(live, Options{PauseAtFirstRefusal: true})
	m.manual = true
	m = settle(t, m, tea.WindowSizeMsg{Width: w, Height: h}, frameMsg{})
	for !m.paused && !m.done {
		m = settle(t, m, frame(50*time.Millisecond))
	}
	return m
}

// TestPausesAtFirstRefusal: the dashboard runs, then pauses by itself
// within a frame of the first refused write, saying why and how to go on.
func TestPausesAtFirstRefusal(t *testing.T) {
	live := newLive(t, "overlap")
	m := runToFirstPause(t, live, 100, 30)
	snap := m.snaps[m.focus]
	if !m.paused || len(snap.Refusals) != 1 {
		t.Fatalf("paused %v with %d refusals, want paused at the first", m.paused, len(snap.Refusals))
	}
	if lag := snap.Now - snap.Refusals[0].At; lag < 0 || lag > 50*time.Millisecond {
		t.Errorf("paused %v after the refusal, want within a frame", lag)
	}
	for _, want := range []string{"PAUSED", "paused at the first refusal · space resumes, n steps"} {
		if !strings.Contains(m.View(), want) {
			t.Errorf("view lacks %q", want)
		}
	}
	requireGolden(t, "overlap_paused_at_first_refusal", m.View())

	// Once resumed it runs on: it pauses only once.
	m = settle(t, m, press("space")...)
	for range 100 {
		m = settle(t, m, frame(50*time.Millisecond))
	}
	if m.paused || len(m.snaps[m.focus].Refusals) < 2 {
		t.Errorf("paused %v with %d refusals after resuming, want it running past the next", m.paused, len(m.snaps[m.focus].Refusals))
	}
}

// TestPausesAtFirstStaleWriteWithoutGate: with only the naive mode there
// is no refusal; the first stale landing is the moment.
func TestPausesAtFirstStaleWriteWithoutGate(t *testing.T) {
	sc, _ := spec.Builtin("gap")
	live, err := harness.NewLive(sc, []history.Mode{history.Naive}, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := runToFirstPause(t, live, 100, 30)
	if !m.paused || m.snaps[0].Totals.StaleWritesLanded != 1 || !strings.Contains(m.status, "paused at the first stale write") {
		t.Errorf("paused %v, %d stale, status %q: want paused at the first stale write", m.paused, m.snaps[0].Totals.StaleWritesLanded, m.status)
	}
}

// TestNoPauseUnlessAsked: the zero Options never pause by themselves.
func TestNoPauseUnlessAsked(t *testing.T) {
	live := newLive(t, "gap")
	m := settle(t, manual(live), tea.WindowSizeMsg{Width: 100, Height: 30}, frameMsg{})
	for range 40 {
		m = settle(t, m, frame(50*time.Millisecond))
	}
	if m.paused {
		t.Errorf("paused by itself at %v with zero Options", m.snaps[m.focus].Now)
	}
}

// TestProgramPausesAtFirstRefusal runs the dashboard as a program, frames
// of 100ms sent as a frame-locked driver would: it pauses by itself at
// the first frame after the refusal, and the frames after it move nothing.
func TestProgramPausesAtFirstRefusal(t *testing.T) {
	live := newLive(t, "overlap")
	m := New(live, Options{PauseAtFirstRefusal: true})
	m.manual = true
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30))
	for range 30 {
		tm.Send(frame(100 * time.Millisecond))
	}
	tm.Type("+") // queued behind the frames: once it shows, they were all applied
	waitFor(t, tm, "speed 2x")
	final := finalModel(t, tm)
	if !final.paused || live.Now() != 1900*time.Millisecond {
		t.Errorf("paused %v at %v, want paused at 1.900s: the first frame after the refusal at 1.829s", final.paused, live.Now())
	}
	if v := final.View(); !strings.Contains(v, "PAUSED  t 1.900s") || !strings.Contains(v, "rejection log · fenced · 1 refused") {
		t.Errorf("the screen does not show the run paused at the first refusal:\n%s", v)
	}
}

// TestEveryStepIsAnEvent: from anywhere in a run, each n adds at least
// one event to the mode in view; time never moves on without one.
func TestEveryStepIsAnEvent(t *testing.T) {
	live := newLive(t, "overlap")
	live.Advance(9652 * time.Millisecond)
	m := settle(t, manual(live), tea.WindowSizeMsg{Width: 100, Height: 30}, frameMsg{})
	for i := range 50 {
		before := m.snaps[m.focus]
		m = settle(t, m, press("n")...)
		after := m.snaps[m.focus]
		if after.Events <= before.Events {
			t.Fatalf("press %d: %d events at %v, then %d at %v", i+1, before.Events, before.Now, after.Events, after.Now)
		}
	}
}

// TestStatusHints: before the first refusal the status line says the run
// will pause there by itself (not to stall a holder, which would only get
// in its way); once it has paused, the stall hint; a run that has ended
// says so, never "resumed at".
func TestStatusHints(t *testing.T) {
	live := newLive(t, "gap")
	m := New(live, Options{PauseAtFirstRefusal: true})
	m.manual = true
	m = settle(t, m, tea.WindowSizeMsg{Width: 100, Height: 30}, frameMsg{})
	if got := m.statusLine(); !strings.Contains(got, "the run pauses there by itself") || strings.Contains(got, "s stalls") {
		t.Errorf("before the first refusal, status %q", got)
	}
	for !m.paused && !m.done {
		m = settle(t, m, frame(50*time.Millisecond))
	}
	m = settle(t, m, press("space")...) // resume: "resumed at ..."
	if !strings.Contains(m.statusLine(), "resumed at") {
		t.Fatalf("after resuming, status %q", m.statusLine())
	}
	m.status = ""
	if got := m.statusLine(); !strings.Contains(got, "s stalls the selected holder") {
		t.Errorf("after the first refusal, status %q", got)
	}
	m = settle(t, m, press("space")...)
	m = settle(t, m, press("space")...) // "resumed at" once more
	for range 200 {
		if m.done {
			break
		}
		m = settle(t, m, frame(100*time.Millisecond))
	}
	if !m.done {
		t.Fatal("gap did not end")
	}
	if got := m.statusLine(); strings.Contains(got, "resumed at") || !strings.Contains(got, "the run has ended") {
		t.Errorf("a finished run's status %q", got)
	}
}
