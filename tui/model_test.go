package tui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// started is a manual model of scenario advanced by d, sized and given its
// first snapshot.
func started(t *testing.T, scenario string, d time.Duration, edit ...func(*spec.Scenario)) (Model, *harness.Live) {
	t.Helper()
	live := newLive(t, scenario, edit...)
	live.Advance(d)
	return settle(t, manual(live), tea.WindowSizeMsg{Width: 100, Height: 30}, frameMsg{}), live
}

func TestControls(t *testing.T) {
	tests := []struct {
		name     string
		scenario string
		at       time.Duration
		keys     []string
		check    func(t *testing.T, m Model, live *harness.Live)
	}{
		{name: "space pauses and resumes", scenario: "overlap", keys: []string{"space"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if !live.Paused() || !m.paused || !strings.Contains(m.View(), "PAUSED") {
					t.Error("space did not pause")
				}
				m = settle(t, m, press("space")...)
				if live.Paused() || !strings.Contains(m.View(), "RUNNING") {
					t.Error("a second space did not resume")
				}
			}},
		{name: "+ doubles the speed", scenario: "overlap", keys: []string{"+"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if live.Speed() != 2 || !strings.Contains(m.View(), "speed 2x") {
					t.Errorf("speed %v, want 2x on the Live and on screen", live.Speed())
				}
			}},
		{name: "- stops at the slowest pace", scenario: "overlap", keys: []string{"----------"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if live.Speed() != harness.MinSpeed || m.statusErr {
					t.Errorf("speed %v (status %q), want %v without an error", live.Speed(), m.status, harness.MinSpeed)
				}
			}},
		{name: "+ stops at the fastest pace", scenario: "overlap", keys: []string{strings.Repeat("+", 20)},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if live.Speed() != harness.MaxSpeed {
					t.Errorf("speed %v, want %v", live.Speed(), harness.MaxSpeed)
				}
			}},
		{name: "n pauses and runs to the next event of the mode in view", scenario: "gap", keys: []string{"n"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				// The twin steps timers until the fenced history has one
				// more event: timers that emit nothing are no step.
				twin := newLive(t, "gap")
				twin.Advance(0)
				before, _ := twin.Snapshot(history.Fenced)
				want := before
				for want.Events == before.Events && twin.Step() {
					want, _ = twin.Snapshot(history.Fenced)
				}
				got := m.snaps[m.focus]
				if !live.Paused() || got.Now != want.Now || got.Events != before.Events+1 || got.Events != want.Events {
					t.Errorf("after n: paused %v, at %v with %d events; the next event is %d at %v",
						live.Paused(), got.Now, got.Events, before.Events+1, want.Now)
				}
				if !strings.Contains(m.status, "stepped one event") {
					t.Errorf("status %q, want it to say one event was stepped", m.status)
				}
			}},
		{name: ". steps one event, as the help says n and . do", scenario: "gap", keys: []string{"."},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if !live.Paused() || !strings.Contains(m.status, "stepped one event, to event") {
					t.Errorf("after .: paused %v, status %q", live.Paused(), m.status)
				}
			}},
		{name: "] and [ step the drop rate within [0, 1]", scenario: "overlap", keys: []string{"]]]"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if got := m.snaps[m.focus].DropRate; got != 0.15 {
					t.Errorf("drop rate %v after three ], want 0.15", got)
				}
				m = settle(t, m, press("[[[[[")...)
				if got := m.snaps[m.focus].DropRate; got != 0 {
					t.Errorf("drop rate %v after five [, want 0", got)
				}
			}},
		{name: "r restarts the coordinator without its fences, R with them", scenario: "overlap", keys: []string{"r", "R"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				iv := live.Scenario().Interventions
				if len(iv) != 2 || iv[0].Kind != history.RestartCoordinator || iv[0].Persist || !iv[1].Persist {
					t.Errorf("interventions %+v, want a restart without and then with persistence", iv)
				}
			}},
		{name: "p toggles the gate push", scenario: "overlap", keys: []string{"p"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if !m.snaps[m.focus].Push || !strings.Contains(m.View(), "push on") {
					t.Error("push not on after p")
				}
			}},
		{name: "tab switches the view and back", scenario: "gap", at: 1500 * time.Millisecond, keys: []string{"tab"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if m.info.modes[m.focus] != history.Naive || !strings.Contains(m.View(), "holders · naive") {
					t.Error("tab did not bring naive into view")
				}
				m = settle(t, m, press("v")...)
				if m.info.modes[m.focus] != history.Fenced {
					t.Error("v did not go back to fenced")
				}
			}},
		{name: "f cycles the log filter through the resources and back to all", scenario: "crowd", at: 10 * time.Second, keys: []string{"f"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if m.filter != 0 || !strings.Contains(m.View(), "only res-1") {
					t.Errorf("filter %d, want res-1", m.filter)
				}
				m = settle(t, m, press("ffff")...)
				if m.filter != 4 {
					t.Errorf("filter %d, want res-5", m.filter)
				}
				m = settle(t, m, press("f")...)
				if m.filter != -1 || strings.Contains(m.View(), "only ") {
					t.Errorf("filter %d, want all again", m.filter)
				}
			}},
		{name: "j, k, G and g move the selection within the list", scenario: "crowd", at: 10 * time.Second, keys: []string{"jjjjjjjjjj"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				last := len(m.holders.rows) - 1
				if m.holders.cursor != last {
					t.Errorf("cursor %d after ten j, want the last row %d", m.holders.cursor, last)
				}
				m = settle(t, m, press("k")...)
				if m.holders.cursor != last-1 {
					t.Errorf("cursor %d after k, want %d", m.holders.cursor, last-1)
				}
				m = settle(t, m, press("g")...)
				if m.holders.cursor != 0 || m.sel.res != 0 {
					t.Errorf("cursor %d after g, want 0", m.holders.cursor)
				}
				m = settle(t, m, press("G")...)
				if m.holders.cursor != last {
					t.Errorf("cursor %d after G, want %d", m.holders.cursor, last)
				}
			}},
		{name: "s on a free resource says so and changes nothing", scenario: "gap", at: 2500 * time.Millisecond, keys: []string{"s"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if !m.statusErr || !strings.Contains(m.status, "res-1 is free") {
					t.Errorf("status %q, want a complaint that res-1 is free", m.status)
				}
				if n := len(live.Scenario().Interventions); n != 0 {
					t.Errorf("%d interventions recorded, want none", n)
				}
			}},
		{name: "s stalls the selected holder for two TTLs", scenario: "gap", at: 500 * time.Millisecond, keys: []string{"s"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				iv := live.Scenario().Interventions
				if len(iv) != 1 || iv[0].Agent != "agent-1" || iv[0].Duration != 2*time.Second || iv[0].At != 500*time.Millisecond {
					t.Errorf("interventions %+v, want agent-1 stalled 2s at 500ms", iv)
				}
				if m.statusErr || !strings.Contains(m.status, "stalled agent-1 (res-1@1) for 2.000s at 500ms") {
					t.Errorf("status %q", m.status)
				}
			}},
		{name: "? shows and hides the full help", scenario: "gap", keys: []string{"?"},
			check: func(t *testing.T, m Model, live *harness.Live) {
				if !strings.Contains(m.View(), "restart, fences kept") {
					t.Error("full help not shown")
				}
				m = settle(t, m, press("?")...)
				if strings.Contains(m.View(), "restart, fences kept") {
					t.Error("full help still shown")
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, live := started(t, tt.scenario, tt.at)
			tt.check(t, settle(t, m, press(tt.keys...)...), live)
		})
	}
}

func TestLogScrolls(t *testing.T) {
	m, _ := started(t, "crowd", 10*time.Second)
	m = settle(t, m, tea.WindowSizeMsg{Width: 80, Height: 24}) // room for two of the six refusals
	first, newest := "res-3#1 agent-38@5", "res-3#2 agent-44@55"
	if v := m.View(); strings.Contains(v, first) || !strings.Contains(v, newest) {
		t.Fatalf("the log does not follow the newest refusal:\n%s", v)
	}
	m = settle(t, m, press("bbb")...)
	if v := m.View(); !strings.Contains(v, first) || strings.Contains(v, newest) {
		t.Errorf("b did not scroll back to the first refusal:\n%s", v)
	}
	m = settle(t, m, press("ddd")...)
	if v := m.View(); strings.Contains(v, first) || !strings.Contains(v, newest) {
		t.Errorf("d did not scroll down to the newest refusal:\n%s", v)
	}
}

func TestInterventionErrorShowsInStatus(t *testing.T) {
	m, live := started(t, "gap", 0)
	next, cmd := m.enqueue(op{kind: opIntervene, iv: history.Intervention{Kind: history.StallAgent, Agent: "agent-99", Duration: time.Second}})
	m = settle(t, next, cmd())
	if !m.statusErr || !strings.Contains(m.status, "agent-99") {
		t.Errorf("status %q, want the Live's error naming agent-99", m.status)
	}
	if n := len(live.Scenario().Interventions); n != 0 {
		t.Errorf("%d interventions recorded, want none", n)
	}
	if !strings.Contains(m.View(), "error: ") {
		t.Error("the error is not on screen")
	}
}

func TestSelectionFollowsAgentIntoBelievesExpired(t *testing.T) {
	m, live := started(t, "gap", 500*time.Millisecond)
	m = settle(t, m, press("g")...) // choose the first row: agent-1, the holder
	if m.sel.agent != "agent-1" {
		t.Fatalf("selected %q at 500ms, want the holder agent-1", m.sel.agent)
	}
	live.Advance(700 * time.Millisecond) // agent-2 holds res-1; agent-1 is stalled past its expiry
	m = settle(t, m, frameMsg{})
	row, _ := m.holders.selected()
	if row.agent != "agent-1" || !row.zombie || m.holders.cursor != 1 {
		t.Errorf("selected row %+v at row %d, want agent-1's believes-expired row 1", row, m.holders.cursor)
	}
}

// TestSelectionStaysOnTheChosenAgent: once agent-1's belief ends (its
// write refused), the cursor rests on the resource's row, now agent-2's,
// but the selection is still agent-1: s does not stall agent-2.
func TestSelectionStaysOnTheChosenAgent(t *testing.T) {
	m, live := started(t, "gap", 500*time.Millisecond)
	m = settle(t, m, press("g")...)
	live.Advance(1000 * time.Millisecond) // agent-1's stale write is refused at 1.400s
	m = settle(t, m, frameMsg{})
	if m.sel.agent != "agent-1" {
		t.Fatalf("selection moved to %q, want agent-1, the agent chosen", m.sel.agent)
	}
	if !strings.Contains(m.statusLine(), "selected agent-1 (no lease now)") {
		t.Errorf("status line %q does not say agent-1 holds nothing now", m.statusLine())
	}
	m = settle(t, m, press("s")...)
	if n := len(live.Scenario().Interventions); n != 0 || !strings.Contains(m.status, "agent-1 holds no lease now") {
		t.Errorf("s made %d interventions (status %q), want none and a word on agent-1", n, m.status)
	}
	m = settle(t, m, press("g")...) // choosing again takes the row's holder
	m = settle(t, m, press("s")...)
	if ivs := live.Scenario().Interventions; len(ivs) != 1 || ivs[0].Agent != "agent-2" {
		t.Errorf("interventions %+v, want one stall of agent-2", ivs)
	}
}

func TestSingleModeRun(t *testing.T) {
	sc, _ := spec.Builtin("gap")
	live, err := harness.NewLive(sc, []history.Mode{history.Naive}, 1)
	if err != nil {
		t.Fatal(err)
	}
	live.Advance(1500 * time.Millisecond)
	m := settle(t, manual(live), tea.WindowSizeMsg{Width: 100, Height: 30}, frameMsg{})
	m = settle(t, m, press("tab")...)
	view := m.View()
	for _, want := range []string{"view [naive]", "stale writes  naive: 1 landed, 0 refused (no gate)", "run both modes to compare", "writes landed · naive · no gate", "1 landed silently"} {
		if !strings.Contains(view, want) {
			t.Errorf("single-mode view lacks %q:\n%s", want, view)
		}
	}
}

// TestEverySizeFits draws 1,000 agents at many terminal sizes: the view is
// always exactly the terminal's height and never wider than it.
func TestEverySizeFits(t *testing.T) {
	m, _ := started(t, "crowd", 3*time.Second, func(sc *spec.Scenario) { sc.Agents, sc.Resources = 1000, 100 })
	for _, help := range []bool{false, true} {
		for _, w := range []int{80, 81, 99, 120, 200} {
			for _, h := range []int{24, 25, 31, 50, 80} {
				m.help.ShowAll = help
				m = settle(t, m, tea.WindowSizeMsg{Width: w, Height: h})
				lines := strings.Split(m.View(), "\n")
				if len(lines) != h {
					t.Errorf("%dx%d (full help %v): %d lines", w, h, help, len(lines))
				}
				for i, l := range lines {
					if ansi.StringWidth(l) > w {
						t.Errorf("%dx%d (full help %v): line %d is %d wide", w, h, help, i+1, ansi.StringWidth(l))
					}
				}
			}
		}
	}
}

func TestTooSmall(t *testing.T) {
	m, _ := started(t, "gap", 0)
	for _, size := range [][2]int{{79, 24}, {80, 23}, {20, 5}, {0, 0}} {
		m = settle(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		want := fmt.Sprintf("terminal too small: need 80x24, have %dx%d", size[0], size[1])
		if got := m.View(); got != want {
			t.Errorf("%v: view %q, want %q", size, got, want)
		}
	}
}

func TestWorkSkipsAnUnchangedRun(t *testing.T) {
	live := newLive(t, "gap")
	live.SetPaused(true)
	modes := live.Modes()
	first := work(live, modes, nil, 0, false, false, false)().(workMsg)
	if len(first.snaps) != len(modes) {
		t.Fatalf("first round took %d snapshots, want %d", len(first.snaps), len(modes))
	}
	if again := work(live, modes, nil, live.Now(), true, false, false)().(workMsg); again.snaps != nil || !again.paused {
		t.Errorf("an unchanged paused run was snapshotted again (paused %v)", again.paused)
	}
	if withOp := work(live, modes, []op{{kind: opSpeed, factor: 2}}, live.Now(), true, false, false)().(workMsg); withOp.snaps == nil || withOp.speed != 2 {
		t.Errorf("a round with a control did not snapshot (speed %v)", withOp.speed)
	}
}

func TestOpsApplyInOrder(t *testing.T) {
	live := newLive(t, "gap")
	// Pause, then advance: the advance must see the pause and do nothing.
	msg := work(live, live.Modes(), []op{{kind: opPause}, {kind: opAdvance, d: time.Second}}, 0, false, false, false)().(workMsg)
	if live.Now() != 0 || !msg.paused {
		t.Errorf("an advance queued after a pause moved time to %v", live.Now())
	}
	if _, err := (op{kind: 99}).apply(live); err == nil || errors.Is(err, spec.ErrInvalidScenario) {
		t.Errorf("an unknown op gave %v, want a plain error", err)
	}
}
