package tui_test

import (
	"context"
	"fmt"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tui"
)

// A Model is built without a terminal; it draws what the last window size
// allows.
func ExampleNew() {
	sc, _ := spec.Builtin(spec.DefaultScenario)
	live, err := harness.NewLive(sc, nil, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := tui.New(live, tui.Options{}).Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	fmt.Println(m.View())
	// Output: terminal too small: need 80x24, have 60x20
}

func ExampleOptions_Validate() {
	fmt.Println(tui.Options{}.Validate())
	fmt.Println(tui.Options{Tick: 10 * time.Millisecond}.Validate())
	// Output:
	// <nil>
	// tui: tick must be in [33ms, 100ms] (or 0 for 50ms), got 10ms
}

// Run shows the dashboard until the person presses q.
func ExampleRun() {
	sc, _ := spec.Builtin("crowd")
	live, err := harness.NewLive(sc, nil, 2) // both modes, at twice wall speed
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	if err := tui.Run(context.Background(), live, tui.Options{Tick: 40 * time.Millisecond}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
