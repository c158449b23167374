package tui

import (
	"strconv"

	"github.com/charmbracelet/bubbles/table"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// gatesPane is every resource's FenceGate: the floor (the highest fence it
// has admitted, and whose), and how many writes it admitted and refused.
// It scrolls with the selected resource. Naive mode has no gates.
type gatesPane struct {
	st            *styles
	tbl           table.Model
	width, height int
	want          int // the width the table needs
	mode          history.Mode
	gates         []liveview.GateView
	writes        []liveview.WritesView // naive mode, in place of gates
	sel           int
	view          string
}

// newGatesPane sizes the columns for the longest names and a four-digit
// fence, so the layout does not shift as fences grow.
func newGatesPane(st *styles, agents, resources []string) gatesPane {
	res := max(longest(resources)+2, len("resource"))
	floor := longest(agents) + 5
	cols := []table.Column{{Title: "resource", Width: res}, {Title: "floor", Width: floor}, {Title: "admitted", Width: 8}, {Title: "refused", Width: 7}}
	w := 0
	for _, c := range cols {
		w += c.Width + 1 // the cell's right padding
	}
	return gatesPane{st: st, want: w, tbl: table.New(table.WithColumns(cols), table.WithStyles(st.Table), table.WithFocused(true))}
}

// gatesLines is the height that shows every gate of snap, or, in naive
// mode, why there are none.
func gatesLines(snap *liveview.Snapshot) int {
	if snap.Gates == nil {
		return naiveWritesLines(snap)
	}
	return 2 + max(len(snap.Gates), 1)
}

// SetSize gives the pane its box; the first line is the title.
func (p *gatesPane) SetSize(width, height int) {
	if width == p.width && height == p.height {
		return
	}
	p.width, p.height = width, height
	p.tbl.SetWidth(width)
	p.tbl.SetHeight(max(height-1, 2))
	p.render()
}

func (p *gatesPane) setSnapshot(snap *liveview.Snapshot, sel selection) {
	p.mode, p.gates, p.writes, p.sel = snap.Mode, snap.Gates, snap.Writes, sel.res
	p.render()
}

func (p *gatesPane) render() {
	n := max(p.height-2, 1)
	off := window(len(p.gates), n, p.sel)
	end := min(off+n, len(p.gates))
	rows := make([]table.Row, 0, end-off)
	for i := off; i < end; i++ {
		g := p.gates[i]
		mark := "  "
		if i == p.sel {
			mark = "> "
		}
		rows = append(rows, table.Row{mark + g.Resource, holderAt(g.FloorHolder, g.FloorFence),
			strconv.Itoa(g.Admitted), strconv.Itoa(g.Refused)})
	}
	p.tbl.SetRows(rows)
	if c := p.sel - off; p.tbl.Cursor() != c { // each call renders every row: skip the second when it can
		p.tbl.SetCursor(c)
	}
	p.view = p.draw()
}

// draw draws the title and the table, or why there is none.
func (p *gatesPane) draw() string {
	title := p.st.PaneTitle.Render("gates") + p.st.Muted.Render(" · "+string(p.mode))
	if p.gates == nil {
		return drawNaiveWrites(p.st, p.writes, p.sel, p.width, p.height)
	}
	return fit(titled(title, p.tbl.View()), p.width, p.height)
}

// View returns the pane as last drawn.
func (p *gatesPane) View() string { return p.view }
