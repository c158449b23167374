package tui

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/leasefence/lab/spec"
)

// BenchmarkView1000Agents measures one frame of a crowd of 1,000 agents on
// 100 resources, 5 virtual seconds in, part by part: the snapshot round
// (a tea.Cmd, off the event loop: both modes copied out of the Live), the
// Update that takes it in and formats the panes, and View, which the
// renderer calls after every message. At 20 frames a second all three
// share 50ms.
func BenchmarkView1000Agents(b *testing.B) {
	for _, size := range []struct {
		name string
		w, h int
	}{{"100x30", 100, 30}, {"200x60", 200, 60}} {
		live := newLive(b, "crowd", func(sc *spec.Scenario) { sc.Agents, sc.Resources = 1000, 100 })
		live.Advance(5 * time.Second)
		m := settle(b, manual(live), tea.WindowSizeMsg{Width: size.w, Height: size.h}, frameMsg{})
		// An op forces the snapshots even though virtual time stands still.
		round := work(live, m.info.modes, []op{{kind: opAdvance}}, 0, true, false, false)
		b.Run("snapshot/"+size.name, func(b *testing.B) {
			for b.Loop() {
				round()
			}
		})
		msg := round().(workMsg)
		b.Run("update/"+size.name, func(b *testing.B) {
			for b.Loop() {
				m.busy = true
				m.Update(msg)
			}
		})
		b.Run("view/"+size.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				n += len(m.View())
			}
			if n == 0 {
				b.Fatal("empty view")
			}
		})
	}
}
