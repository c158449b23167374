package tui

import (
	"flag"
	"os"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

func TestMain(m *testing.M) {
	// Goldens are plain text: no escape sequences whatever the terminal.
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// update reports whether goldens are to be rewritten: teatest's golden
// package registers -update, and it is reused here, not declared twice.
func update() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// newLive is a paused-pace Live of a built-in scenario in both modes:
// nothing moves unless the test advances it.
func newLive(t testing.TB, name string, edit ...func(*spec.Scenario)) *harness.Live {
	t.Helper()
	sc, ok := spec.Builtin(name)
	if !ok {
		t.Fatalf("no built-in scenario %q", name)
	}
	for _, e := range edit {
		e(&sc)
	}
	live, err := harness.NewLive(sc, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	return live
}

// manual is New without the ticker: frames come only from the test.
func manual(live *harness.Live) Model {
	m := New(live, Options{})
	m.manual = true
	return m
}

// settle delivers msg and then, synchronously, every command that
// follows, the way the program would: for a manual model these are only
// rounds of work, so it ends when the model is idle.
func settle(t testing.TB, m tea.Model, msgs ...tea.Msg) Model {
	t.Helper()
	for _, msg := range msgs {
		var cmd tea.Cmd
		m, cmd = m.Update(msg)
		for cmd != nil {
			next := cmd()
			if next == nil {
				break
			}
			if _, ok := next.(tea.QuitMsg); ok {
				break
			}
			m, cmd = m.Update(next)
		}
	}
	return m.(Model)
}

// frame is a frame-locked tick that moves virtual time on by d.
func frame(d time.Duration) tea.Msg { return frameMsg{advance: d} }

// keys turns a string into key presses; "space" and "tab" are named.
func press(names ...string) []tea.Msg {
	var msgs []tea.Msg
	for _, n := range names {
		switch n {
		case "space":
			msgs = append(msgs, tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}})
		case "tab":
			msgs = append(msgs, tea.KeyMsg{Type: tea.KeyTab})
		case "down":
			msgs = append(msgs, tea.KeyMsg{Type: tea.KeyDown})
		case "up":
			msgs = append(msgs, tea.KeyMsg{Type: tea.KeyUp})
		default:
			for _, r := range n {
				msgs = append(msgs, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
			}
		}
	}
	return msgs
}

// Both runners' paced runs are sources.
var (
	_ Source = (*harness.Live)(nil)
	_ Source = (*realtime.Live)(nil)
)
