package tui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/table"
	"github.com/charmbracelet/lipgloss"

	"github.com/leasefence/lab/history"
)

// styles is every style the dashboard draws with, in one place. Colour
// only ever repeats what a word or a glyph already says, so a terminal
// without colour (lipgloss falls back to plain text) loses nothing.
type styles struct {
	Title     lipgloss.Style // the app name
	PaneTitle lipgloss.Style // each pane's first line
	Muted     lipgloss.Style // labels and secondary text
	Value     lipgloss.Style // numbers worth reading

	Running lipgloss.Style
	Paused  lipgloss.Style
	Done    lipgloss.Style

	ViewOn  lipgloss.Style // the mode in focus
	ViewOff lipgloss.Style

	Refused lipgloss.Style // a write the gate refused: the evidence
	Stale   lipgloss.Style // a stale write that landed: the damage
	Good    lipgloss.Style

	StatusOK  lipgloss.Style
	StatusErr lipgloss.Style

	Table table.Styles
	Help  help.Styles

	// States and Marks colour the timeline glyphs and the state words.
	States [5]lipgloss.Style // by harness.AgentState
	Marks  [3]lipgloss.Style // by harness.MarkKind
}

func defaultStyles() *styles {
	c := func(s string) lipgloss.Color { return lipgloss.Color(s) }
	fg := func(s string) lipgloss.Style { return lipgloss.NewStyle().Foreground(c(s)) }
	s := &styles{
		Title:     lipgloss.NewStyle().Bold(true).Foreground(c("12")),
		PaneTitle: lipgloss.NewStyle().Bold(true).Foreground(c("12")),
		Muted:     fg("245"),
		Value:     lipgloss.NewStyle().Bold(true),
		Running:   fg("10"),
		Paused:    lipgloss.NewStyle().Bold(true).Foreground(c("11")),
		Done:      fg("14"),
		ViewOn:    lipgloss.NewStyle().Bold(true).Underline(true),
		ViewOff:   fg("245"),
		Refused:   lipgloss.NewStyle().Bold(true).Foreground(c("9")),
		Stale:     lipgloss.NewStyle().Bold(true).Foreground(c("13")),
		Good:      fg("10"),
		StatusOK:  fg("14"),
		StatusErr: lipgloss.NewStyle().Bold(true).Foreground(c("9")),
		Table: table.Styles{
			Header:   lipgloss.NewStyle().Bold(true).Foreground(c("245")).PaddingRight(1),
			Cell:     lipgloss.NewStyle().PaddingRight(1),
			Selected: lipgloss.NewStyle().Bold(true).Reverse(true),
		},
	}
	h := help.New().Styles
	h.ShortKey, h.FullKey = fg("12"), fg("12")
	h.ShortDesc, h.FullDesc = fg("250"), fg("250")
	s.Help = h
	s.States = [5]lipgloss.Style{
		history.AgentIdle:    fg("240"),
		history.AgentWaiting: fg("11"),
		history.AgentHolding: fg("10"),
		history.AgentStalled: fg("14"),
		history.AgentZombie:  lipgloss.NewStyle().Bold(true).Foreground(c("9")),
	}
	s.Marks = [3]lipgloss.Style{
		history.MarkAdmitted: lipgloss.NewStyle().Bold(true).Foreground(c("10")),
		history.MarkRefused:  lipgloss.NewStyle().Bold(true).Foreground(c("9")).Reverse(true),
		history.MarkStale:    lipgloss.NewStyle().Bold(true).Foreground(c("13")).Reverse(true),
	}
	return s
}
