package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// runInfo is what does not change during a run.
type runInfo struct {
	name      string
	seed      uint64
	agents    int
	resources int
	ttl       time.Duration
	modes     []history.Mode
}

// headerPane is three lines: the scenario; the clock, the pace and the
// fault knobs; and the focused mode's running totals (refusals and stale
// writes are in the strip below, for both modes).
type headerPane struct {
	st    *styles
	info  runInfo
	width int
	lines [3]string
	view  string
}

// SetSize sets the width; the header is always three lines.
func (p *headerPane) SetSize(width, _ int) {
	p.width = width
	p.draw()
}

// clock is the run's pace as the header tells it: paused (the
// simulator), frozen (a real-time run's picture held while the run goes
// on, now at runNow), done, and the speed.
type clock struct {
	paused, frozen, done bool
	runNow               time.Duration
	speed                float64
}

// set rebuilds the lines from the focused snapshot and the Live's pace.
func (p *headerPane) set(snap *liveview.Snapshot, focus history.Mode, c clock) {
	st, info := p.st, p.info
	p.lines[0] = st.Title.Render("leasefence lab") + "  " + st.Value.Render(info.name) +
		st.Muted.Render(fmt.Sprintf(" · seed %d · %s on %s · ttl %s", info.seed,
			history.Plural(info.agents, "agent", "agents"), history.Plural(info.resources, "resource", "resources"), history.FormatDuration(info.ttl)))

	var run string
	switch {
	case c.frozen:
		run = st.Paused.Render("FROZEN")
	case c.done:
		run = st.Done.Render("DONE")
	case c.paused:
		run = st.Paused.Render("PAUSED")
	default:
		run = st.Running.Render("RUNNING")
	}
	push := "off"
	if snap.Push {
		push = "on"
	}
	var views []string
	for _, m := range info.modes {
		if m == focus {
			views = append(views, st.ViewOn.Render("["+string(m)+"]"))
		} else {
			views = append(views, st.ViewOff.Render(string(m)))
		}
	}
	t := st.Value.Render("t "+history.FormatDuration(snap.Now)) + st.Muted.Render(" / "+history.FormatDuration(snap.Duration))
	if c.frozen {
		// The picture is of snap.Now; the run is elsewhere by now.
		t = st.Value.Render("t "+history.FormatDuration(snap.Now)) + st.Muted.Render(" · run ") +
			st.Value.Render(history.FormatDuration(c.runNow)) + st.Muted.Render(" / "+history.FormatDuration(snap.Duration))
	}
	p.lines[1] = run + "  " + t + st.Muted.Render("  speed ") + st.Value.Render(fmtSpeed(c.speed)) +
		st.Muted.Render(fmt.Sprintf("  drop %.2f  push %s  view ", snap.DropRate, push)) + strings.Join(views, " ")
	if note := faultNote(snap); note != "" {
		p.lines[1] += "  " + st.Refused.Render(note)
	}

	tot := snap.Totals
	// Naive has no gate to admit anything: its writes simply land.
	writes := fmt.Sprintf("%d admitted", tot.CommitsAdmitted)
	if !snap.Fenced {
		writes = fmt.Sprintf("%d landed (%d stale)", tot.CommitsAdmitted, tot.StaleWritesLanded)
	}
	p.lines[2] = st.Value.Render(string(snap.Mode)+":") + st.Muted.Render(fmt.Sprintf(" %d acquired  %d renewed  %d expired  %s  %d lost  %s",
		tot.Acquisitions, tot.Renewals, tot.Expiries, writes, tot.MessagesLost, history.Plural(snap.Events, "event", "events")))
	p.draw()
}

// faultNote says which faults are in force now, whatever their kind,
// e.g. "faults: pause_leader on etcd member 1 (the leader), 1.200s left";
// "" when none is.
func faultNote(snap *liveview.Snapshot) string {
	var notes []string
	for _, f := range snap.Faults {
		if !f.Active(snap.Now) {
			continue
		}
		note := f.Kind + " on " + f.Target
		if f.Detail != "" {
			note += " (" + f.Detail + ")"
		}
		notes = append(notes, fmt.Sprintf("%s, %s left", note, history.FormatDuration(f.End-snap.Now)))
	}
	if len(notes) == 0 {
		return ""
	}
	return "faults: " + strings.Join(notes, "; ")
}

// View returns the three lines as last drawn.
func (p *headerPane) View() string { return p.view }

// draw cuts the lines to the width.
func (p *headerPane) draw() {
	p.view = cut(p.lines[0], p.width) + "\n" + cut(p.lines[1], p.width) + "\n" + cut(p.lines[2], p.width)
}

// stripPane is the one-line comparison of two contenders on the same
// faults, counting the same things for both: the stale writes that landed
// and those a gate refused (a stale write is one under a fence below one
// already written: naive, it lands over the newer write; fenced, the gate
// refuses it). A contender written to naively has no gate, so none of its
// stale writes is refused, and the strip says so. With more than two
// contenders it compares the one in view with the one the person picked
// (Model's against).
type stripPane struct {
	st    *styles
	width int
	line  string
	view  string
}

// SetSize sets the width; the strip is one line.
func (p *stripPane) SetSize(width, _ int) {
	p.width = width
	p.view = cut(p.line, p.width)
}

// set draws the comparison of modes a and b (indices into modes and
// snaps; b < 0 when the run has one mode), the naive one first.
func (p *stripPane) set(modes []history.Mode, snaps []liveview.Snapshot, a, b int) {
	st := p.st
	pair := []int{a}
	if b >= 0 && b != a {
		pair = append(pair, b)
		if snaps[a].Fenced && !snaps[b].Fenced || (snaps[a].Fenced == snaps[b].Fenced && b < a) {
			pair[0], pair[1] = b, a
		}
	}
	sides := make([]string, len(pair))
	for k, i := range pair {
		sides[k] = p.side(modes[i], snaps[i])
	}
	p.line = st.Muted.Render("stale writes  ") + sides[0]
	switch {
	case len(sides) == 2:
		p.line += st.Muted.Render("  vs  ") + sides[1] + st.Muted.Render("  (same faults)")
	default:
		p.line += st.Muted.Render("  (run both modes to compare)")
	}
	if len(modes) > 2 {
		p.line += st.Muted.Render("  c: compare another")
	}
	p.view = cut(p.line, p.width)
}

// side is one contender's part of the comparison: its stale writes
// landed, then refused, and the same for forged proofs when there were
// any.
func (p *stripPane) side(m history.Mode, snap liveview.Snapshot) string {
	st := p.st
	t := snap.Totals
	out := st.Value.Render(string(m)+": ") + p.counts(snap.Fenced, t.StaleWritesLanded, t.CommitsRefused)
	if t.ForgeriesRefused+t.ForgeriesLanded > 0 {
		// Forged proofs are refused before the gate: not stale fences.
		out += st.Muted.Render(", forgeries ") + p.counts(snap.Fenced, t.ForgeriesLanded, t.ForgeriesRefused)
	}
	if t.WritesFailed > 0 {
		// The store's failures, not the lock's: said, not counted as either.
		out += st.Muted.Render(", " + history.Plural(t.WritesFailed, "write", "writes") + " failed by the store")
	}
	return out
}

// counts is "N landed, M refused": through a gate a landing is a bug;
// with none, a landing is the silent overwrite the lab shows, and nothing
// can be refused.
func (p *stripPane) counts(fenced bool, landed, refused int) string {
	st := p.st
	l := st.Good.Render(fmt.Sprintf("%d landed", landed))
	switch {
	case landed > 0 && fenced:
		l = st.Stale.Render(fmt.Sprintf("%d landed (a bug)", landed))
	case landed > 0:
		l = st.Stale.Render(fmt.Sprintf("%d landed", landed))
	}
	if !fenced {
		return l + st.Muted.Render(fmt.Sprintf(", %d refused (no gate)", refused))
	}
	r := st.Muted
	if refused > 0 {
		r = st.Refused
	}
	return l + st.Muted.Render(", ") + r.Render(fmt.Sprintf("%d refused", refused))
}

// View returns the line as last drawn.
func (p *stripPane) View() string { return p.view }
