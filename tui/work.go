package tui

import (
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// This file is the only place the dashboard touches the Live. Update never
// calls it: it queues ops, and one tea.Cmd at a time applies the queue in
// key-press order and then snapshots every mode. One command in flight
// keeps the ops ordered (a pause can never race the step after it) and
// bounds the dashboard's load on the Live to one snapshot per frame.

// opKind is a control the person asked for.
type opKind uint8

const (
	opAdvance   opKind = iota // move virtual time on by d, unless paused (frame-locked drivers)
	opPause                   // toggle pause
	opSpeed                   // multiply the speed by factor, within the Live's limits
	opStep                    // pause if running, then run to the next event of mode
	opIntervene               // a recorded intervention
)

// op is one queued control.
type op struct {
	kind   opKind
	d      time.Duration
	factor float64
	iv     history.Intervention
	mode   history.Mode // the mode in view, whose next event a step runs to
	what   string       // the intervention, for the status line
}

// frameMsg asks for a fresh snapshot. The ticker sends it with advance 0
// (the Live paces itself); a frame-locked driver, such as a test, sends a
// positive advance to move virtual time on by exactly that much first.
type frameMsg struct{ advance time.Duration }

// workMsg is what one round of work saw: the snapshots of every mode (nil
// when nothing changed), the Live's pace, and what the ops did.
type workMsg struct {
	snaps  []liveview.Snapshot
	paused bool
	speed  float64
	now    time.Duration
	status string
	err    error
	// held is why the round paused the run at the first refusal, once
	// seen (see Options.PauseAtFirstRefusal); "" when it did not.
	held     string
	heldSeen bool // the first refusal was seen, paused here or not
	// freeze: the run cannot pause (Source.RealTime), so the dashboard
	// is to hold snaps, the picture of the first refusal, instead.
	freeze bool
}

// work applies ops to live in order, then snapshots every mode. With no ops
// and virtual time still at last, it skips the snapshot: a paused or
// finished run costs nothing per frame; so does a frozen picture, which
// only wants to know where the run is. With watchFirst it looks for the
// first refusal after every advance and at the end, and pauses the run
// there: the frames queued behind it then move nothing.
func work(live Source, modes []history.Mode, ops []op, last time.Duration, have, frozen, watchFirst bool) tea.Cmd {
	return func() tea.Msg {
		var r workMsg
		for _, o := range ops {
			status, err := o.apply(live)
			if err != nil {
				r.err, r.status = err, ""
			} else if status != "" {
				r.status, r.err = status, nil
			}
			if watchFirst && !r.heldSeen && o.kind == opAdvance {
				r.holdAtFirstRefusal(live, snapshots(live, modes))
			}
		}
		r.paused, r.speed, r.now = live.Paused(), live.Speed(), live.Now()
		if frozen || len(ops) == 0 && have && r.now == last {
			return r
		}
		r.snaps = snapshots(live, modes)
		if watchFirst && !r.heldSeen {
			r.holdAtFirstRefusal(live, r.snaps)
			r.paused = live.Paused()
		}
		return r
	}
}

func snapshots(live Source, modes []history.Mode) []liveview.Snapshot {
	snaps := make([]liveview.Snapshot, len(modes))
	for i, m := range modes {
		snaps[i], _ = live.Snapshot(m)
	}
	return snaps
}

// holdAtFirstRefusal pauses live if snaps show the first refusal, unless
// the person has paused it already, and notes why. A real-time run goes
// on: the dashboard freezes its picture there instead.
func (r *workMsg) holdAtFirstRefusal(live Source, snaps []liveview.Snapshot) {
	note := firstRefusalNote(snaps, live.RealTime())
	if note == "" {
		return
	}
	r.heldSeen = true
	switch {
	case live.RealTime():
		r.freeze, r.held = true, note
	case !live.Paused():
		live.SetPaused(true)
		r.held = note
	}
}

// apply does the op and says what it did.
func (o op) apply(live Source) (string, error) {
	switch o.kind {
	case opAdvance:
		if !live.Paused() {
			live.Advance(o.d)
		}
		return "", nil
	case opPause:
		p := !live.Paused()
		live.SetPaused(p)
		if p {
			return "paused at " + history.FormatDuration(live.Now()), nil
		}
		return "resumed at " + history.FormatDuration(live.Now()), nil
	case opSpeed:
		x := min(max(live.Speed()*o.factor, liveview.MinSpeed), liveview.MaxSpeed)
		if err := live.SetSpeed(x); err != nil {
			return "", err
		}
		return "speed " + fmtSpeed(x), nil
	case opStep:
		live.SetPaused(true)
		return stepEvent(live, o.mode), nil
	case opIntervene:
		at := live.Now()
		if err := live.Intervene(o.iv); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s at %s", o.what, history.FormatDuration(at)), nil
	}
	return "", fmt.Errorf("tui: unknown op %d", o.kind)
}

// maxStepTimers bounds how many of the Live's timers one step fires
// looking for the next event of the mode in view: a timer that emits
// nothing (a message in flight, the other mode's work) is no event to the
// person, so one press runs through them.
const maxStepTimers = 100_000

// stepEvent runs live to the next event of mode m, and says which it is.
// Several events at one instant (one timer's work) come together, and the
// status says how many.
func stepEvent(live Source, m history.Mode) string {
	before, _ := live.Snapshot(m)
	for range maxStepTimers {
		if !live.Step() {
			return "nothing left to step: the run is over"
		}
		after, _ := live.Snapshot(m)
		if n := after.Events - before.Events; n > 0 {
			if n == 1 {
				return fmt.Sprintf("stepped one event, to event %d at %s", after.Events, history.FormatDuration(live.Now()))
			}
			return fmt.Sprintf("stepped to %s: %d events at one instant (events %d-%d)", history.FormatDuration(live.Now()), n, before.Events+1, after.Events)
		}
		if after.Done {
			return "nothing left to step: the run is over"
		}
	}
	return "stepped to " + history.FormatDuration(live.Now()) + ": no event of " + string(m) + " yet"
}
