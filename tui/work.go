package tui

import (
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/spec"
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
	opStep                    // pause if running, then fire the next event
	opIntervene               // a recorded intervention
)

// op is one queued control.
type op struct {
	kind   opKind
	d      time.Duration
	factor float64
	iv     spec.Intervention
	what   string // the intervention, for the status line
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
}

// work applies ops to live in order, then snapshots every mode. With no ops
// and virtual time still at last, it skips the snapshot: a paused or
// finished run costs nothing per frame.
func work(live Source, modes []history.Mode, ops []op, last time.Duration, have bool) tea.Cmd {
	return func() tea.Msg {
		var r workMsg
		for _, o := range ops {
			status, err := o.apply(live)
			if err != nil {
				r.err, r.status = err, ""
			} else if status != "" {
				r.status, r.err = status, nil
			}
		}
		r.paused, r.speed, r.now = live.Paused(), live.Speed(), live.Now()
		if len(ops) == 0 && have && r.now == last {
			return r
		}
		r.snaps = make([]liveview.Snapshot, len(modes))
		for i, m := range modes {
			r.snaps[i], _ = live.Snapshot(m)
		}
		return r
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
		if !live.Step() {
			return "nothing left to step: the run is over", nil
		}
		return "stepped to " + history.FormatDuration(live.Now()), nil
	case opIntervene:
		at := live.Now()
		if err := live.Intervene(o.iv); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s at %s", o.what, history.FormatDuration(at)), nil
	}
	return "", fmt.Errorf("tui: unknown op %d", o.kind)
}
