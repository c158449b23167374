package tui

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/spec"
)

// These tests run the dashboard as a program (teatest) with frame-locked
// ticks: no ticker, and each frame the test sends moves virtual time on by
// exactly what it says, so what the screen shows is deterministic.

const waitLong = 5 * time.Second

func startProgram(t *testing.T, live *harness.Live) *teatest.TestModel {
	t.Helper()
	tm := teatest.NewTestModel(t, manual(live), teatest.WithInitialTermSize(100, 30))
	t.Cleanup(func() {
		if err := tm.Quit(); err != nil {
			t.Error(err)
		}
	})
	return tm
}

func waitFor(t *testing.T, tm *teatest.TestModel, want string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(want)) },
		teatest.WithDuration(waitLong), teatest.WithCheckInterval(5*time.Millisecond))
}

func finalModel(t *testing.T, tm *teatest.TestModel) Model {
	t.Helper()
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'q'}})
	m, ok := tm.FinalModel(t, teatest.WithFinalTimeout(waitLong)).(Model)
	if !ok {
		t.Fatal("final model is not a tui.Model")
	}
	return m
}

func TestPauseStopsVirtualTime(t *testing.T) {
	live := newLive(t, "overlap")
	tm := startProgram(t, live)
	for range 3 {
		tm.Send(frame(100 * time.Millisecond))
	}
	waitFor(t, tm, "t 300ms")

	tm.Send(tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}})
	waitFor(t, tm, "PAUSED")
	for range 5 {
		tm.Send(frame(100 * time.Millisecond))
	}
	// A control queued behind the frames: once its status shows, every
	// frame before it has been applied.
	tm.Type("+")
	waitFor(t, tm, "speed 2x")

	m := finalModel(t, tm)
	if got := live.Now(); got != 300*time.Millisecond {
		t.Errorf("after pausing, five frames moved virtual time to %v, want it held at 300ms", got)
	}
	if got := m.snaps[m.focus].Now; got != 300*time.Millisecond {
		t.Errorf("the dashboard shows %v, want 300ms", got)
	}
	if !m.paused || !strings.Contains(m.View(), "PAUSED") {
		t.Errorf("the final view does not say PAUSED:\n%s", m.View())
	}
}

func TestStallMakesRefusal(t *testing.T) {
	// No long stalls of its own, so any refusal is the one the person made.
	live := newLive(t, "overlap", func(sc *spec.Scenario) { sc.Agent.Stall.TailP = 0 })
	holder := advanceUntilStalled(t, live)

	tm := startProgram(t, live)
	tm.Send(frame(time.Millisecond))
	waitFor(t, tm, "selected "+holder.Holder+" on res-1")
	tm.Type("s")
	waitFor(t, tm, "stalled "+holder.Holder)
	tm.Send(frame(3 * time.Second))
	refused := fmt.Sprintf("%s@%d vs", holder.Holder, holder.Fence)
	waitFor(t, tm, refused)

	m := finalModel(t, tm)
	snap := m.snaps[m.focus]
	if len(snap.Refusals) != 1 || snap.Refusals[0].Holder != holder.Holder {
		t.Fatalf("refusals after stalling %s: %+v, want exactly its write", holder.Holder, snap.Refusals)
	}
	if sc := live.Scenario(); len(sc.Interventions) != 1 || sc.Interventions[0].Kind != history.StallAgent ||
		sc.Interventions[0].Agent != holder.Holder || sc.Interventions[0].Duration != 2*sc.TTL {
		t.Errorf("recorded interventions %+v, want one 2xTTL stall of %s", sc.Interventions, holder.Holder)
	}
}

// advanceUntilStalled moves live on until res-1's holder is between its
// check and its write (the moment a stall turns into a stale write), and
// returns that holder.
func advanceUntilStalled(t *testing.T, live *harness.Live) liveview.HolderView {
	t.Helper()
	for range 2000 {
		live.Advance(5 * time.Millisecond)
		s, _ := live.Snapshot(history.Fenced)
		if h := s.Holders[0]; h.State == history.AgentStalled && s.Totals.CommitsAdmitted > 0 {
			return h
		}
	}
	t.Fatal("no holder was ever caught between its check and its write")
	return liveview.HolderView{}
}

func TestQuitEndsProgram(t *testing.T) {
	live := newLive(t, "gap")
	tm := teatest.NewTestModel(t, manual(live), teatest.WithInitialTermSize(80, 24))
	waitFor(t, tm, "leasefence lab")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	tm.WaitFinished(t, teatest.WithFinalTimeout(waitLong))
	if _, ok := tm.FinalModel(t).(Model); !ok {
		t.Fatal("no final model")
	}
}
