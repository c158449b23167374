package bench

import (
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tui"
)

// dashboard returns the dashboard of a crowd of 1,000 agents on 100
// resources, 5 virtual seconds in, sized w by h and holding its first
// snapshot, built through the public API only: New, a WindowSizeMsg, and
// then the program's own loop (Init's frame, the work command it starts)
// run by hand until the first frame is drawn.
func dashboard(b *testing.B, w, h int) tea.Model {
	sc, ok := spec.Builtin("crowd")
	if !ok {
		b.Fatal("no built-in scenario crowd")
	}
	sc.Agents, sc.Resources = 1000, 100
	live, err := harness.NewLive(sc, nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	live.Advance(5 * time.Second)
	var m tea.Model = tui.New(live, tui.Options{})
	m, _ = m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	waiting := m.View()

	// Commands run on their own goroutines, as in a program: the frame
	// ticker's command sleeps until the next tick, the work command
	// returns the snapshots at once. Messages are handled one at a time
	// on this goroutine until the view changes from the waiting frame.
	msgs := make(chan tea.Msg, 64)
	start := func(cmd tea.Cmd) {
		if cmd != nil {
			go func() { msgs <- cmd() }()
		}
	}
	start(m.Init())
	deadline := time.After(10 * time.Second)
	for m.View() == waiting {
		select {
		case msg := <-msgs:
			if batch, ok := msg.(tea.BatchMsg); ok {
				for _, cmd := range batch {
					start(cmd)
				}
				continue
			}
			var cmd tea.Cmd
			m, cmd = m.Update(msg)
			start(cmd)
		case <-deadline:
			b.Fatalf("no frame after 10s; the view is still %q", waiting)
		}
	}
	return m
}

// BenchmarkDashboard1000Agents measures one frame of the dashboard for
// 1,000 agents, in colour as on a real terminal, at two terminal sizes:
//
//   - view: View, which the renderer calls after every message; it joins
//     panes formatted when their data or size last changed;
//   - resize: a WindowSizeMsg and the View after it, which lays out and
//     formats every pane again from the snapshot: the most a frame's
//     formatting can cost.
//
// Taking the snapshot and formatting it on a new frame go through
// messages internal to the dashboard; its own benchmark in package tui
// measures them.
func BenchmarkDashboard1000Agents(b *testing.B) {
	defer lipgloss.SetColorProfile(lipgloss.ColorProfile())
	lipgloss.SetColorProfile(termenv.TrueColor)
	for _, size := range []struct{ w, h int }{{100, 30}, {200, 60}} {
		m := dashboard(b, size.w, size.h)
		name := fmt.Sprintf("%dx%d", size.w, size.h)
		b.Run("op=view/size="+name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				n += len(m.View())
			}
			if n == 0 {
				b.Fatal("empty view")
			}
		})
		b.Run("op=resize/size="+name, func(b *testing.B) {
			b.ReportAllocs()
			msg := tea.WindowSizeMsg{Width: size.w, Height: size.h}
			var n int
			for b.Loop() {
				m, _ = m.Update(msg)
				n += len(m.View())
			}
			if n == 0 {
				b.Fatal("empty view")
			}
		})
	}
}
