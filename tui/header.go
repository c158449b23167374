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

// set rebuilds the lines from the focused snapshot and the Live's pace.
func (p *headerPane) set(snap *liveview.Snapshot, focus history.Mode, paused, done bool, speed float64) {
	st, info := p.st, p.info
	p.lines[0] = st.Title.Render("leasefence lab") + "  " + st.Value.Render(info.name) +
		st.Muted.Render(fmt.Sprintf(" · seed %d · %s on %s · ttl %s", info.seed,
			history.Plural(info.agents, "agent", "agents"), history.Plural(info.resources, "resource", "resources"), history.FormatDuration(info.ttl)))

	var run string
	switch {
	case done:
		run = st.Done.Render("DONE")
	case paused:
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
	p.lines[1] = run + "  " + st.Value.Render("t "+history.FormatDuration(snap.Now)) + st.Muted.Render(" / "+history.FormatDuration(snap.Duration)) +
		st.Muted.Render("  speed ") + st.Value.Render(fmtSpeed(speed)) +
		st.Muted.Render(fmt.Sprintf("  drop %.2f  push %s  view ", snap.DropRate, push)) + strings.Join(views, " ")
	if note := memberFaultNote(snap); note != "" {
		p.lines[1] += "  " + st.Refused.Render(note)
	}

	t := snap.Totals
	// Naive has no gate to admit anything: its writes simply land.
	writes := fmt.Sprintf("%d admitted", t.CommitsAdmitted)
	if snap.Mode == history.Naive {
		writes = fmt.Sprintf("%d landed (%d stale)", t.CommitsAdmitted, t.StaleWritesLanded)
	}
	p.lines[2] = st.Value.Render(string(snap.Mode)+":") + st.Muted.Render(fmt.Sprintf(" %d acquired  %d renewed  %d expired  %s  %d lost  %s",
		t.Acquisitions, t.Renewals, t.Expiries, writes, t.MessagesLost, history.Plural(snap.Events, "event", "events")))
	p.draw()
}

// memberFaultNote says which etcd member faults are in force now, e.g.
// "etcd: member 1 (leader) paused, 1.2s left"; "" when none is.
func memberFaultNote(snap *liveview.Snapshot) string {
	var notes []string
	for _, f := range snap.MemberFaults {
		if !f.Active(snap.Now) {
			continue
		}
		who := fmt.Sprintf("member %d", f.Member)
		if f.Leader {
			who += " (leader)"
		}
		what := "paused"
		switch {
		case f.Kind == history.PartitionMember && f.Value > 0:
			what = "delayed " + history.FormatDuration(time.Duration(f.Value*float64(time.Second)))
		case f.Kind == history.PartitionMember:
			what = "cut off"
		}
		notes = append(notes, fmt.Sprintf("%s %s, %s left", who, what, history.FormatDuration(f.At+f.Duration-snap.Now)))
	}
	if len(notes) == 0 {
		return ""
	}
	return "etcd: " + strings.Join(notes, "; ")
}

// View returns the three lines as last drawn.
func (p *headerPane) View() string { return p.view }

// draw cuts the lines to the width.
func (p *headerPane) draw() {
	p.view = cut(p.lines[0], p.width) + "\n" + cut(p.lines[1], p.width) + "\n" + cut(p.lines[2], p.width)
}

// stripPane is the one-line comparison: on the same faults, how many stale
// writes landed silently in naive mode, and how many the gates refused in
// fenced mode.
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

func (p *stripPane) set(modes []history.Mode, snaps []liveview.Snapshot) {
	st := p.st
	var naive, fenced string
	for i, m := range modes {
		t := snaps[i].Totals
		switch m {
		case history.Naive:
			s := st.Good
			if t.StaleWritesLanded > 0 {
				s = st.Stale
			}
			naive = st.Value.Render("naive: ") + s.Render(history.Plural(t.StaleWritesLanded, "stale write", "stale writes")+" landed silently")
			if t.ForgeriesLanded > 0 {
				naive += st.Muted.Render(", ") + st.Stale.Render(history.Plural(t.ForgeriesLanded, "forgery", "forgeries")+" landed")
			}
		case history.Fenced:
			s := st.Muted
			if t.CommitsRefused > 0 {
				s = st.Refused
			}
			// Beside the naive figure the noun is already said; alone it is not.
			landed := fmt.Sprintf("%d landed", t.StaleWritesLanded)
			if len(modes) == 1 {
				landed = history.Plural(t.StaleWritesLanded, "stale write landed", "stale writes landed")
			}
			if t.StaleWritesLanded > 0 {
				landed = st.Stale.Render(landed + " (a bug)")
			} else {
				landed = st.Good.Render(landed)
			}
			fenced = st.Value.Render("fenced: ") + s.Render(fmt.Sprintf("%d refused", t.CommitsRefused)) + st.Muted.Render(", ") + landed
			if t.ForgeriesRefused+t.ForgeriesLanded > 0 {
				// Forged proofs are refused before the gate: not stale fences.
				forged := st.Refused.Render(history.Plural(t.ForgeriesRefused, "forgery", "forgeries") + " refused")
				if t.ForgeriesLanded > 0 {
					forged += st.Muted.Render(", ") + st.Stale.Render(fmt.Sprintf("%d landed (a bug)", t.ForgeriesLanded))
				}
				fenced += st.Muted.Render(", ") + forged
			}
		}
		if t.WritesFailed > 0 {
			// The store's failures, not the lock's: said, not counted as either.
			failed := st.Muted.Render(", " + history.Plural(t.WritesFailed, "write", "writes") + " failed by the store")
			if m == history.Naive {
				naive += failed
			} else {
				fenced += failed
			}
		}
	}
	switch {
	case naive != "" && fenced != "":
		p.line = naive + st.Muted.Render("  vs  ") + fenced + st.Muted.Render("  (same faults)")
	case naive != "":
		p.line = naive + st.Muted.Render("  (run both modes to compare)")
	default:
		p.line = fenced + st.Muted.Render("  (run both modes to compare)")
	}
	p.view = cut(p.line, p.width)
}

// View returns the line as last drawn.
func (p *stripPane) View() string { return p.view }
