package tui

import (
	"fmt"
	"time"
)

// Frame intervals: the dashboard redraws 10 to 30 times a second.
const (
	DefaultTick = 50 * time.Millisecond
	MinTick     = 33 * time.Millisecond
	MaxTick     = 100 * time.Millisecond
)

// Options configures the dashboard. The zero value is valid.
type Options struct {
	// Tick is the frame interval: how often the dashboard takes a fresh
	// snapshot of the run, and how often Run's pacing catches the
	// simulation up with wall time. 0 means DefaultTick; otherwise it must
	// lie in [MinTick, MaxTick].
	Tick time.Duration
	// PauseAtFirstRefusal pauses the run by itself, once, when a write is
	// first refused at a gate (or, with only the naive mode, first lands
	// stale), with a line saying why and how to go on: the moment the lab
	// exists to show is never missed. lab watch sets it.
	PauseAtFirstRefusal bool
}

// Validate reports an Options field out of range, naming it.
func (o Options) Validate() error {
	if o.Tick != 0 && (o.Tick < MinTick || o.Tick > MaxTick) {
		return fmt.Errorf("tui: tick must be in [%v, %v] (or 0 for %v), got %v", MinTick, MaxTick, DefaultTick, o.Tick)
	}
	return nil
}

// tick is the frame interval to use: the default for 0, and out-of-range
// values clamped, because New cannot return an error (Run validates first).
func (o Options) tick() time.Duration {
	if o.Tick == 0 {
		return DefaultTick
	}
	return min(max(o.Tick, MinTick), MaxTick)
}
