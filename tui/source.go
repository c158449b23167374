package tui

import (
	"context"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// Source is a run the dashboard shows and steers: the simulator paced by
// a *harness.Live, or a real-time run (realtime.Live). Its methods are
// called from the dashboard's goroutines and must be safe for concurrent
// use.
type Source interface {
	// Run runs until the run is done or ctx ends, pacing at tick where
	// pacing applies.
	Run(ctx context.Context, tick time.Duration) error
	// Header is the run's history header: who takes part, under which
	// lease terms.
	Header() history.Header
	Modes() []history.Mode
	// Now is the run's time: virtual for the simulator, true time since
	// the start for a real-time run.
	Now() time.Duration
	Snapshot(m history.Mode) (liveview.Snapshot, bool)
	// RealTime reports whether the run keeps true time against lock
	// servers that keep their own: it cannot pause, step, advance or
	// change pace (SetPaused, Step and Advance do nothing), so the
	// dashboard freezes its picture instead of pausing, and the run goes
	// on. The simulator's runs report false.
	RealTime() bool
	Paused() bool
	// SetPaused pauses or resumes the run; a real-time run ignores it.
	SetPaused(p bool)
	Speed() float64
	// SetSpeed sets the pace, or says why it cannot.
	SetSpeed(x float64) error
	// Step runs the next event and reports whether there was one it could
	// run.
	Step() bool
	// Advance moves a paused run d ahead, where it can.
	Advance(d time.Duration)
	// Intervene applies a live intervention, or says why it cannot.
	Intervene(iv history.Intervention) error
}
