package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/viewport"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// logPane is the rejection log: every write a gate refused, newest last:
// when, which gate and its sequence number, the refused holder@fence, and
// the floor holder@fence that refused it.
// The viewport is created on the first size the terminal reports; it
// follows the newest refusal unless the person has scrolled up.
type logPane struct {
	st            *styles
	vp            viewport.Model
	ready         bool
	width, height int
	mode          history.Mode
	fenced        bool   // the mode writes through gates: its log is of refusals, else of stale writes
	filter        string // a resource name, or "" for all
	shown         int    // refusals shown after filtering
	total         int    // refusals in the snapshot
	stale         int    // naive: stale writes landed
	refused       int    // every refusal of the run, kept or not
	header        string // the column headers, aligned with the lines
	view          string
	// key identifies the content last built, so an unchanged log is not
	// rebuilt every frame.
	key logKey
}

type logKey struct {
	mode   history.Mode
	filter string
	n      int
	last   time.Duration
	seq    uint64
	res    string
}

// SetSize creates the viewport on the first call and resizes it after.
func (p *logPane) SetSize(width, height int) {
	if p.ready && width == p.width && height == p.height {
		return
	}
	p.width, p.height = width, height
	h := max(height-2, 1) // title and column headers
	if !p.ready {
		p.vp = viewport.New(width, h)
		p.vp.MouseWheelEnabled = false
		p.ready = true
	} else {
		follow := p.vp.AtBottom()
		p.vp.Width, p.vp.Height = width, h
		if follow {
			p.vp.GotoBottom()
		}
	}
	p.view = p.draw()
}

// lines is the height that shows every refusal kept (the title, the
// column headers and a line each), or the note that stands in for them.
func (p *logPane) lines() int {
	switch {
	case p.total == 0:
		return 1 + 2
	case p.shown == 0:
		return 1 + 1
	}
	return 2 + p.shown
}

// setSnapshot rebuilds the content if the refusals, the filter or the mode
// changed.
func (p *logPane) setSnapshot(snap *liveview.Snapshot, filter string) {
	p.mode, p.fenced, p.filter, p.total, p.stale = snap.Mode, snap.Fenced, filter, len(snap.Refusals), snap.Totals.StaleWritesLanded
	p.refused = snap.Totals.CommitsRefused
	k := logKey{mode: snap.Mode, filter: filter, n: len(snap.Refusals)}
	if n := len(snap.Refusals); n > 0 {
		last := snap.Refusals[n-1]
		k.last, k.seq, k.res = last.At, last.Seq, last.Resource
	}
	if !snap.Fenced {
		p.total = len(snap.StaleWrites)
		k.n = p.total
		if p.total > 0 {
			last := snap.StaleWrites[p.total-1]
			k.last, k.res = last.At, last.Resource
		}
	}
	defer func() { p.view = p.draw() }()
	if k == p.key || !p.ready {
		return
	}
	p.key = k
	if !snap.Fenced {
		var body string
		p.header, body, p.shown = p.naiveLogBody(snap, filter)
		p.setContent(body)
		return
	}
	// Align the columns on the widest value shown.
	var tw, rw int
	p.shown = 0
	for _, r := range snap.Refusals {
		if filter == "" || r.Resource == filter {
			p.shown++
			tw = max(tw, len(history.FormatDuration(r.At)))
			rw = max(rw, len(r.Resource)+1+len(strconv.FormatUint(r.Seq, 10)))
		}
	}
	p.header = fmt.Sprintf("%*s %-*s %s", tw, "time", rw, "gate#seq", "refused vs floor")
	var b strings.Builder
	first := true
	for _, r := range snap.Refusals {
		if filter != "" && r.Resource != filter {
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		first = false
		fmt.Fprintf(&b, "%*s %-*s %s vs %s", tw, history.FormatDuration(r.At), rw, r.Resource+"#"+strconv.FormatUint(r.Seq, 10),
			p.st.Refused.Render(holderAt(r.Holder, r.Fence)), holderAt(r.FloorHolder, r.FloorFence))
	}
	p.setContent(b.String())
}

// setContent puts the lines in the viewport, which keeps following the
// newest unless the person scrolled up.
func (p *logPane) setContent(s string) {
	follow := p.vp.AtBottom()
	p.vp.SetContent(s)
	if follow {
		p.vp.GotoBottom()
	}
}

func (p *logPane) scroll(lines int) {
	if lines < 0 {
		p.vp.ScrollUp(-lines)
	} else {
		p.vp.ScrollDown(lines)
	}
	p.view = p.draw()
}

// draw draws the title, the column headers and the visible refusals.
func (p *logPane) draw() string {
	title := p.st.PaneTitle.Render("rejection log") + p.st.Muted.Render(fmt.Sprintf(" · %s · %d refused", p.mode, p.refused))
	if !p.fenced {
		title = p.naiveTitle()
	}
	if p.filter != "" {
		title += p.st.Muted.Render(" · only ") + p.st.Value.Render(p.filter)
	}
	var body string
	switch {
	case !p.ready:
		body = ""
	case p.total == 0 && !p.fenced:
		body = renderLines(p.st.Muted, "no stale write yet: select a holder", "and stall it (s) past its TTL")
	case p.total == 0:
		body = renderLines(p.st.Muted, "no refusals yet: select a holder", "and stall it (s) past its TTL")
	case p.shown == 0:
		body = p.st.Muted.Render("nothing on " + p.filter + " (f: next filter)")
	default:
		body = p.st.Muted.Render(p.header) + "\n" + p.vp.View()
	}
	return fit(titled(title, body), p.width, p.height)
}

// View returns the pane as last drawn.
func (p *logPane) View() string { return p.view }
