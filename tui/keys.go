package tui

import (
	"slices"

	"github.com/charmbracelet/bubbles/key"
)

// keyMap is the dashboard's one keymap; bubbles/help draws it.
type keyMap struct {
	Pause, Faster, Slower, Step                   key.Binding
	Up, Down, Top, Bottom                         key.Binding
	Stall, DropUp, DropDown, Restart, RestartKeep key.Binding
	Push                                          key.Binding
	View, Compare, Filter, LogUp, LogDown         key.Binding
	Help, Quit                                    key.Binding
	// realTime: the run cannot pause, step or change pace, so space
	// freezes the picture, and the help leaves out the keys that would
	// only be refused.
	realTime bool
}

func defaultKeys(realTime bool) keyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	pause := "pause/resume"
	if realTime {
		pause = "freeze view/live"
	}
	return keyMap{
		realTime:    realTime,
		Pause:       b([]string{" "}, "space", pause),
		Step:        b([]string{"n", "."}, "n/.", "step one event"),
		Faster:      b([]string{"+", "="}, "+", "faster x2"),
		Slower:      b([]string{"-", "_"}, "-", "slower /2"),
		View:        b([]string{"tab", "v"}, "tab/v", "next contender"),
		Compare:     b([]string{"c"}, "c", "compare with another"),
		Help:        b([]string{"?"}, "?", "help"),
		Quit:        b([]string{"q", "ctrl+c"}, "q", "quit"),
		Up:          b([]string{"up", "k"}, "↑/k", "select up"),
		Down:        b([]string{"down", "j"}, "↓/j", "select down"),
		Top:         b([]string{"home", "g"}, "g/home", "first row"),
		Bottom:      b([]string{"end", "G"}, "G/end", "last row"),
		Filter:      b([]string{"f"}, "f", "filter log"),
		LogUp:       b([]string{"pgup", "b"}, "pgup/b", "log up"),
		LogDown:     b([]string{"pgdown", "d"}, "pgdn/d", "log down"),
		Stall:       b([]string{"s"}, "s", "stall selected 2xTTL"),
		DropUp:      b([]string{"]"}, "]", "drop rate +0.05"),
		DropDown:    b([]string{"["}, "[", "drop rate -0.05"),
		Restart:     b([]string{"r"}, "r", "restart, fences lost"),
		RestartKeep: b([]string{"R"}, "R", "restart, fences kept"),
		Push:        b([]string{"p"}, "p", "gate push on/off"),
	}
}

// ShortHelp is the one-line help bar.
func (k keyMap) ShortHelp() []key.Binding {
	return slices.Concat([]key.Binding{k.Pause}, k.pace(), []key.Binding{k.Up, k.Down, k.Stall, k.View, k.Help, k.Quit})
}

// pace is the keys that step and change the speed, none in real time.
func (k keyMap) pace() []key.Binding {
	if k.realTime {
		return nil
	}
	return []key.Binding{k.Step, k.Faster, k.Slower}
}

// FullHelp is the help screen: running, looking, and injecting faults.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		slices.Concat([]key.Binding{k.Pause}, k.pace(), []key.Binding{k.View, k.Help, k.Quit}),
		{k.Up, k.Down, k.Top, k.Bottom, k.Compare, k.Filter, k.LogUp, k.LogDown},
		{k.Stall, k.DropUp, k.DropDown, k.Restart, k.RestartKeep, k.Push},
	}
}
