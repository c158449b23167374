package tui

import (
	"fmt"
	"strconv"
	"time"

	"github.com/charmbracelet/bubbles/table"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/liveview"
)

// holderRow is one line of the holders table: the coordinator's holder of
// a resource, or an agent that still believes in an expired lease on it.
type holderRow struct {
	res    int
	name   string // the resource
	agent  string // "" when the resource is free
	fence  leasefence.Fence
	coord  time.Duration // time until the coordinator ends the lease
	belief time.Duration // time until the agent's own deadline, as it thinks
	state  history.AgentState
	zombie bool // listed because it believes past the coordinator's expiry
}

// holdersPane is the holders table: one row per resource with the
// coordinator's holder, and under it every agent that believes it holds an
// expired lease on that resource. Two rows on one resource is the overlap.
// It owns the selection; only the visible rows are given to the table, so
// a thousand agents cost what a screenful does.
type holdersPane struct {
	st            *styles
	tbl           table.Model
	width, height int
	mode          history.Mode
	rows          []holderRow
	cursor        int
	zombies       int
	view          string
}

// leftWidth is the width the time-left figures are right-aligned to:
// "-10.026s" and "expired" fit.
const leftWidth = 8

var holderColumns = []table.Column{
	{Title: "resource", Width: 9}, {Title: "holder", Width: 10}, {Title: "fence", Width: 6},
	{Title: "lease ends in", Width: 13}, {Title: "holder thinks", Width: 13}, {Title: "state", Width: 18},
}

func newHoldersPane(st *styles) holdersPane {
	return holdersPane{st: st, tbl: table.New(table.WithColumns(holderColumns), table.WithStyles(st.Table), table.WithFocused(true))}
}

// SetSize gives the pane its box; the first line is the title.
func (p *holdersPane) SetSize(width, height int) {
	if width == p.width && height == p.height {
		return
	}
	p.width, p.height = width, height
	p.tbl.SetWidth(width)
	p.tbl.SetHeight(max(height-1, 2))
	p.render()
}

// lines is the height that shows every row: the title, the column
// headers, and the rows (one for an empty table).
func (p *holdersPane) lines() int { return 2 + max(len(p.rows), 1) }

// visible is how many rows fit under the title and the column headers.
func (p *holdersPane) visible() int { return max(p.height-2, 1) }

// setSnapshot rebuilds the rows from snap and puts the cursor back on sel.
// It returns the selection as it now stands.
func (p *holdersPane) setSnapshot(snap *liveview.Snapshot, sel selection) selection {
	p.mode = snap.Mode
	zombies := make(map[string][]liveview.AgentView)
	p.zombies = 0
	for _, a := range snap.Agents {
		if a.State == history.AgentZombie && a.Resource != "" {
			zombies[a.Resource] = append(zombies[a.Resource], a)
			p.zombies++
		}
	}
	rows := make([]holderRow, 0, len(snap.Holders)+p.zombies)
	for i, h := range snap.Holders {
		r := holderRow{res: i, name: h.Resource, agent: h.Holder}
		if h.Holder != "" {
			r.fence, r.coord, r.belief, r.state = h.Fence, h.CoordinatorLeft, h.BeliefLeft, h.State
		}
		rows = append(rows, r)
		for _, z := range zombies[h.Resource] {
			rows = append(rows, holderRow{res: i, name: h.Resource, agent: z.Name, fence: z.Fence,
				belief: z.BeliefLeft, state: z.State, zombie: true})
		}
	}
	p.rows = rows
	p.cursor = p.find(sel)
	p.render()
	return p.selection()
}

// find is the row of sel: its agent on its resource, else its agent on
// any resource (a selection stays on the agent chosen), else the
// resource's first row.
func (p *holdersPane) find(sel selection) int {
	first, elsewhere := -1, -1
	for i, r := range p.rows {
		switch {
		case sel.agent != "" && r.agent == sel.agent && r.res == sel.res:
			return i
		case sel.agent != "" && r.agent == sel.agent && elsewhere < 0:
			elsewhere = i
		case r.res == sel.res && first < 0:
			first = i
		}
	}
	if elsewhere >= 0 {
		return elsewhere
	}
	return max(first, 0)
}

// selection is the selected row as a selection.
func (p *holdersPane) selection() selection {
	if p.cursor >= len(p.rows) {
		return selection{}
	}
	r := p.rows[p.cursor]
	return selection{res: r.res, agent: r.agent}
}

// selected is the selected row, if any.
func (p *holdersPane) selected() (holderRow, bool) {
	if p.cursor >= len(p.rows) {
		return holderRow{}, false
	}
	return p.rows[p.cursor], true
}

// moveTo puts the cursor on row i (clamped) and returns the selection.
func (p *holdersPane) moveTo(i int) selection {
	p.cursor = min(max(i, 0), max(len(p.rows)-1, 0))
	p.render()
	return p.selection()
}

// render hands the table the rows that fit, with a text marker on the
// selected one (the table's highlight is lost without colour).
func (p *holdersPane) render() {
	n := p.visible()
	off := window(len(p.rows), n, p.cursor)
	end := min(off+n, len(p.rows))
	rows := make([]table.Row, 0, end-off)
	for i := off; i < end; i++ {
		r := p.rows[i]
		mark := "  "
		if i == p.cursor {
			mark = "> "
		}
		if r.agent == "" {
			rows = append(rows, table.Row{mark + r.name, "-", "-", fmt.Sprintf("%*s", leftWidth, "-"), fmt.Sprintf("%*s", leftWidth, "-"), "free"})
			continue
		}
		coord, belief := history.FormatDuration(r.coord), history.FormatDuration(r.belief)
		if r.zombie || r.coord <= 0 {
			coord = "expired"
		}
		state := stateWord(r.state)
		switch {
		case !r.zombie && r.belief <= 0:
			// The holder has stopped believing (it gave the lease up, or its
			// grant is still on the way): nothing is left of its belief, and
			// its own state (waiting, idle) would read as if the coordinator
			// had not granted it.
			belief, state = "-", "- not holding"
		case r.belief <= 0:
			// Its own deadline has passed too, but it is stalled in the
			// middle of a write whose check passed: the write lands late.
			belief, state = "expired", "! late write due"
		}
		// Right-aligned, so that seconds line up under seconds.
		rows = append(rows, table.Row{mark + r.name, r.agent, strconv.FormatUint(uint64(r.fence), 10),
			fmt.Sprintf("%*s", leftWidth, coord), fmt.Sprintf("%*s", leftWidth, belief), state})
	}
	p.tbl.SetRows(rows)
	if c := p.cursor - off; p.tbl.Cursor() != c { // each call renders every row: skip the second when it can
		p.tbl.SetCursor(c)
	}
	p.view = p.draw()
}

func (p *holdersPane) title() string {
	t := p.st.PaneTitle.Render("holders") + p.st.Muted.Render(" · "+string(p.mode))
	if p.zombies > 0 {
		t += p.st.Muted.Render(" · ") + p.st.Refused.Render(history.Plural(p.zombies, "agent believes an expired lease", "agents believe expired leases"))
	}
	if len(p.rows) > p.visible() {
		t += p.st.Muted.Render(" · " + strconv.Itoa(p.cursor+1) + "/" + strconv.Itoa(len(p.rows)))
	}
	return t
}

// draw draws the title and the table.
func (p *holdersPane) draw() string {
	return fit(titled(p.title(), p.tbl.View()), p.width, p.height)
}

// View returns the pane as last drawn.
func (p *holdersPane) View() string { return p.view }
