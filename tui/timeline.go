package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// rank names what a timeline cell shows, one glyph each.
type rank uint8

const (
	rankNone     rank = iota // no data: before the run, after now, or beyond the lane's memory
	rankIdle                 // .
	rankWaiting              // ?
	rankHolding              // #
	rankStalled              // ~
	rankAdmitted             // +
	rankZombie               // !
	rankRefused              // x
	rankStale                // S
	numRanks
)

var rankGlyphs = [numRanks]byte{' ', '.', '?', '#', '~', '+', '!', 'x', 'S'}

func markRank(k history.MarkKind) rank {
	switch k {
	case history.MarkRefused:
		return rankRefused
	case history.MarkStale:
		return rankStale
	}
	return rankAdmitted
}

// cell is what happened in one slice of virtual time: how long was spent
// in each state, and the strongest write mark.
type cell struct {
	t    [5]time.Duration // by harness.AgentState
	mark rank
}

// glyph decides what a cell shows. Events win over states, so a refusal,
// a stale write, or a moment of believing an expired lease is never hidden
// by the ordinary states around it; among the ordinary states, holding
// or stalled (whichever lasted longer) wins over waiting, and waiting
// over idle, so a brief hold still shows. Lanes folded per resource leave
// admitted writes out: they would fill every cell.
func (c *cell) glyph(perResource bool) rank {
	switch {
	case c.mark >= rankRefused:
		return c.mark
	case c.mark == rankAdmitted && !perResource:
		return rankAdmitted
	case c.t[history.AgentZombie] > 0:
		return rankZombie
	case c.t[history.AgentHolding]+c.t[history.AgentStalled] > 0:
		if c.t[history.AgentStalled] > c.t[history.AgentHolding] {
			return rankStalled
		}
		return rankHolding
	case c.t[history.AgentWaiting] > 0:
		return rankWaiting
	case c.t[history.AgentIdle] > 0:
		return rankIdle
	}
	return rankNone
}

// glyphRuns is, per rank, the escape sequences around a run of its glyph,
// worked out once, so drawing a lane costs no styling calls.
type glyphRuns [numRanks]struct{ pre, post string }

func newGlyphRuns(st *styles) glyphRuns {
	var g glyphRuns
	for r := range numRanks {
		var s string
		switch r {
		case rankNone:
			continue
		case rankAdmitted:
			s = st.Marks[history.MarkAdmitted].Render("X")
		case rankRefused:
			s = st.Marks[history.MarkRefused].Render("X")
		case rankStale:
			s = st.Marks[history.MarkStale].Render("X")
		default:
			s = st.States[rankState(r)].Render("X")
		}
		i := strings.IndexByte(s, 'X')
		g[r].pre, g[r].post = s[:i], s[i+1:]
	}
	return g
}

func rankState(r rank) history.AgentState {
	switch r {
	case rankWaiting:
		return history.AgentWaiting
	case rankHolding:
		return history.AgentHolding
	case rankStalled:
		return history.AgentStalled
	case rankZombie:
		return history.AgentZombie
	}
	return history.AgentIdle
}

// timelinePane draws recent history as lanes of glyphs, one cell per slice
// of virtual time, so a person sees the overlap: one holder's ! (believes
// an expired lease) under another's #, and the x where the gate refused
// the stale write (S where, in naive mode, it landed). With more agents
// than lines it folds the agents into one lane per resource, which shows
// the strongest state of any agent on that resource (admitted writes,
// which would fill every cell, are left out there), and scrolls with the
// selection.
type timelinePane struct {
	st            *styles
	runs          glyphRuns
	width, height int
	mode          history.Mode
	perResource   bool
	first, total  int // lanes first..first+len(lanes) of total
	from, span    time.Duration
	lanes         []string
	// unwatched is the row that marks, with '=', the intervals a real-time
	// run went on behind a frozen picture; "" when none is in the window.
	unwatched   string
	marks       int // 1 with that row, 0 without
	legend      string
	shortLegend string
	view        string
}

func newTimelinePane(st *styles) timelinePane {
	p := timelinePane{st: st, runs: newGlyphRuns(st)}
	p.legend, p.shortLegend = p.drawLegend(false), p.drawLegend(true)
	return p
}

// SetSize gives the pane its box: a title, the lanes, and a legend.
func (p *timelinePane) SetSize(width, height int) {
	if width == p.width && height == p.height {
		return
	}
	p.width, p.height = width, height
	p.view = p.draw()
}

// rows is how many lanes fit.
func (p *timelinePane) rows() int { return max(p.height-2-p.marks, 1) }

// unwatchedLabel names the row of unwatched intervals.
const unwatchedLabel = "frozen"

// unwatchedIn is the intervals of spans the timeline of snap shows.
func unwatchedIn(spans []span, snap *liveview.Snapshot) []span {
	from := max(snap.Now-min(snap.Window, snap.Duration), 0)
	var in []span
	for _, s := range spans {
		if s.to > from && s.from < snap.Now {
			in = append(in, s)
		}
	}
	return in
}

// setSnapshot rebuilds the visible lanes. The cells cover the last
// TimelineWindow of virtual time, or the whole run when it is shorter; a
// run younger than that fills the lanes from the left. unwatched are the
// intervals in that window a real-time run went on behind a frozen
// picture: a row under the lanes marks them.
func (p *timelinePane) setSnapshot(snap *liveview.Snapshot, sel selection, unwatched []span) {
	p.mode = snap.Mode
	p.span = min(snap.Window, snap.Duration)
	p.from = max(snap.Now-p.span, 0)
	p.unwatched, p.marks = "", min(len(unwatched), 1)
	p.perResource = len(snap.Lanes) > p.rows()
	names := 0
	for _, a := range snap.Agents {
		names = max(names, len(a.Name))
	}
	selIdx := agentIndex(sel.agent)
	if p.perResource {
		p.total = len(snap.Holders)
		names = 0
		for _, h := range snap.Holders {
			names = max(names, len(h.Resource))
		}
		selIdx = sel.res
	} else {
		p.total = len(snap.Lanes)
	}
	if selIdx >= 0 {
		p.first = window(p.total, p.rows(), selIdx)
	}
	p.first = min(p.first, max(p.total-p.rows(), 0))
	n := min(p.rows(), p.total-p.first)
	cols := max(p.width-names-3, 1)
	cells := make([][]cell, n)
	for i := range cells {
		cells[i] = make([]cell, cols)
	}
	c := cellMap{from: p.from, width: p.span, now: snap.Now, cols: cols}
	if p.perResource {
		p.paintResources(cells, snap, c)
	} else {
		for i := range cells {
			c.paintLane(cells[i], &snap.Lanes[p.first+i])
		}
	}
	p.lanes = make([]string, n)
	var b strings.Builder
	for i := range cells {
		b.Reset()
		idx := p.first + i
		name := ""
		if p.perResource {
			name = snap.Holders[idx].Resource
			if idx == sel.res {
				b.WriteString("> ")
			} else {
				b.WriteString("  ")
			}
		} else {
			name = snap.Lanes[idx].Agent
			if name == sel.agent {
				b.WriteString("> ")
			} else {
				b.WriteString("  ")
			}
		}
		b.WriteString(padRight(name, names))
		b.WriteByte(' ')
		p.drawCells(&b, cells[i], p.perResource)
		p.lanes[i] = b.String()
	}
	if len(unwatched) > 0 {
		p.unwatched = p.drawUnwatched(unwatched, c, max(names, len(unwatchedLabel)))
	}
	p.view = p.draw()
}

// drawUnwatched is the row under the lanes with '=' in every cell a
// real-time run went on behind a frozen picture, so a person reads those
// lanes knowing they were not watched as they happened.
func (p *timelinePane) drawUnwatched(spans []span, c cellMap, names int) string {
	row := make([]bool, c.cols)
	for _, s := range spans {
		a, b := max(s.from, c.from), min(s.to, c.now)
		for i := max(c.col(a), 0); i < len(row) && c.edge(i) < b; i++ {
			row[i] = true
		}
	}
	var b strings.Builder
	b.WriteString("  " + padRight(unwatchedLabel, names) + " ")
	for _, on := range row {
		if on {
			b.WriteByte('=')
		} else {
			b.WriteByte(' ')
		}
	}
	return p.st.Muted.Render(strings.TrimRight(b.String(), " "))
}

// paintResources folds every agent's lane into the visible resources'
// lanes, and marks as idle the cells where data is complete and nobody
// acted on the resource.
func (p *timelinePane) paintResources(cells [][]cell, snap *liveview.Snapshot, c cellMap) {
	// Data is complete from the latest first segment of any lane on: before
	// it, some agent's older states have left its ring.
	known := c.from
	for i := range snap.Lanes {
		if s := snap.Lanes[i].Segments; len(s) > 0 {
			known = max(known, s[0].From)
		}
	}
	lo, hi := int32(p.first), int32(p.first+len(cells))
	for i := range snap.Lanes {
		l := &snap.Lanes[i]
		for k, seg := range l.Segments {
			if seg.Resource < lo || seg.Resource >= hi || seg.State == history.AgentIdle {
				continue
			}
			end := c.now
			if k+1 < len(l.Segments) {
				end = l.Segments[k+1].From
			}
			c.span(cells[seg.Resource-lo], seg.From, end, seg.State)
		}
		for _, m := range l.Marks {
			if m.Resource >= lo && m.Resource < hi {
				c.mark(cells[m.Resource-lo], m.At, markRank(m.Kind))
			}
		}
	}
	for _, row := range cells {
		c.span(row, known, c.now, history.AgentIdle)
	}
}

// cellMap maps virtual instants to the cells of a lane.
type cellMap struct {
	from, width, now time.Duration // the lane covers [from, from+width); nothing is drawn past now
	cols             int
}

// col is the cell holding instant t.
func (c cellMap) col(t time.Duration) int {
	return int(int64(t-c.from) * int64(c.cols) / int64(c.width))
}

// edge is the instant cell i starts at.
func (c cellMap) edge(i int) time.Duration {
	return c.from + time.Duration(int64(i)*int64(c.width)/int64(c.cols))
}

// span adds the time spent in state s over [a, b) to the cells it covers.
func (c cellMap) span(row []cell, a, b time.Duration, s history.AgentState) {
	a, b = max(a, c.from), min(b, c.now)
	if b <= a || c.width <= 0 {
		return
	}
	for i := max(c.col(a), 0); i < len(row); i++ {
		lo, hi := max(a, c.edge(i)), min(b, c.edge(i+1))
		if hi <= lo {
			break
		}
		row[i].t[s] += hi - lo
	}
}

// mark records a write at instant t.
func (c cellMap) mark(row []cell, t time.Duration, r rank) {
	if t < c.from || t > c.now || c.width <= 0 {
		return
	}
	i := min(c.col(t), len(row)-1)
	if row[i].mark < r {
		row[i].mark = r
	}
}

// paintLane draws one agent's lane.
func (c cellMap) paintLane(row []cell, l *liveview.Lane) {
	for k, seg := range l.Segments {
		end := c.now
		if k+1 < len(l.Segments) {
			end = l.Segments[k+1].From
		}
		c.span(row, seg.From, end, seg.State)
	}
	for _, m := range l.Marks {
		c.mark(row, m.At, markRank(m.Kind))
	}
}

// drawCells appends the glyphs of row, one styled run per stretch of equal
// glyph.
func (p *timelinePane) drawCells(b *strings.Builder, row []cell, perResource bool) {
	for i := 0; i < len(row); {
		g := row[i].glyph(perResource)
		j := i + 1
		for j < len(row) && row[j].glyph(perResource) == g {
			j++
		}
		r := p.runs[g]
		b.WriteString(r.pre)
		for range j - i {
			b.WriteByte(rankGlyphs[g])
		}
		b.WriteString(r.post)
		i = j
	}
}

// agentIndex maps "agent-N" to N-1, or -1.
func agentIndex(name string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "agent-"))
	if err != nil || n < 1 || !strings.HasPrefix(name, "agent-") {
		return -1
	}
	return n - 1
}

// drawLegend says what each glyph means, each in its own colour; short
// is the same in fewer letters, for narrow terminals.
func (p *timelinePane) drawLegend(short bool) string {
	items := []struct {
		r           rank
		word, short string
	}{{rankIdle, "idle", "idle"}, {rankWaiting, "waiting", "wait"}, {rankHolding, "holding", "hold"},
		{rankStalled, "stalled", "stall"}, {rankZombie, "thinks it holds", "thinks holds"},
		{rankAdmitted, "write", "write"}, {rankRefused, "refused", "refused"}, {rankStale, "stale landed", "stale"}}
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte(' ')
		}
		r := p.runs[it.r]
		word := it.word
		if short {
			word = it.short
		}
		b.WriteString(r.pre + string(rankGlyphs[it.r]) + r.post + " " + word)
	}
	return b.String()
}

// draw draws the title, the lanes and the legend.
func (p *timelinePane) draw() string {
	what := "one lane per agent"
	if p.perResource {
		what = "one lane per resource"
	}
	title := p.st.PaneTitle.Render("timeline") + p.st.Muted.Render(fmt.Sprintf(" · %s · %s to %s · %s",
		p.mode, history.FormatDuration(p.from), history.FormatDuration(p.from+p.span), what))
	if len(p.lanes) < p.total {
		title += p.st.Muted.Render(fmt.Sprintf(" · %d-%d of %d", p.first+1, p.first+len(p.lanes), p.total))
	}
	legend, short, lanes := p.legend, p.shortLegend, strings.Join(p.lanes, "\n")
	if p.unwatched != "" {
		lanes += "\n" + p.unwatched
		legend += p.st.Muted.Render(" = not watched: the view was frozen")
		short += p.st.Muted.Render(" = view frozen")
	}
	if ansi.StringWidth(legend) > p.width {
		legend = short
	}
	// The legend sits under the lanes; lines to spare stay below it.
	return fit(title+"\n"+lanes+"\n"+legend, p.width, p.height)
}

// View returns the pane as last drawn.
func (p *timelinePane) View() string { return p.view }
