package tui

import (
	"context"
	"errors"

	tea "github.com/charmbracelet/bubbletea"
)

// Run shows the dashboard for live in the terminal's alternate screen
// until the person quits or ctx ends. It starts the Live's pacing
// (live.Run at the frame interval) on its own goroutine, so a slow
// terminal never slows the simulation, stops it when the dashboard
// exits, and returns only when both have finished. teaOpts are passed to
// tea.NewProgram after Run's own (the alternate screen, ctx), so a caller
// can choose the input and output.
//
// It returns the Options' validation error before starting anything,
// ctx's error if ctx ended the run, and otherwise any error of the
// program; quitting is not an error, and neither is the simulation
// reaching its end (the dashboard stays open on the final state).
func Run(ctx context.Context, live Source, opts Options, teaOpts ...tea.ProgramOption) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	paceCtx, stop := context.WithCancel(ctx)
	defer stop()
	paced := make(chan error, 1)
	go func() { paced <- live.Run(paceCtx, opts.tick()) }()

	p := tea.NewProgram(New(live, opts), append([]tea.ProgramOption{tea.WithAltScreen(), tea.WithContext(ctx)}, teaOpts...)...)
	_, err := p.Run()
	stop()
	paceErr := <-paced
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if paceErr != nil && !errors.Is(paceErr, context.Canceled) {
		return paceErr
	}
	return nil
}
