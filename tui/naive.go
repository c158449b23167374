package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// Naive mode has no gate to show and nothing refused to log. Its two
// panes say so once (in the left pane's title) and show instead what it
// has: the writes that landed on each resource, and the stale ones among
// them, each over the newer writer it buried.

// drawNaiveWrites is the left pane in naive mode: per resource, the
// writes that landed, how many were stale, and the newest generation's
// writer. Rows scroll with the selected resource.
func drawNaiveWrites(st *styles, writes []liveview.WritesView, sel, width, height int) string {
	title := st.PaneTitle.Render("writes landed") + st.Muted.Render(" · naive · no gate")
	rw := len("resource")
	for _, w := range writes {
		rw = max(rw, len(w.Resource)+2)
	}
	lines := []string{title, st.Table.Header.Render(fmt.Sprintf("%-*s %6s %5s %s", rw, "resource", "landed", "stale", "newest"))}
	n := max(height-2, 1)
	off := window(len(writes), n, sel)
	for i := off; i < min(off+n, len(writes)); i++ {
		w := writes[i]
		mark := "  "
		if i == sel {
			mark = "> "
		}
		stale := fmt.Sprintf("%5d", w.Stale)
		if w.Stale > 0 {
			stale = st.Stale.Render(stale)
		}
		lines = append(lines, fmt.Sprintf("%-*s %6d %s %s", rw, mark+w.Resource, w.Landed, stale, holderAt(w.Newest, w.NewestFence)))
	}
	return fit(strings.Join(lines, "\n"), width, height)
}

// naiveWritesLines is the height that shows every resource's row.
func naiveWritesLines(snap *liveview.Snapshot) int { return 2 + max(len(snap.Writes), 1) }

// naiveLogBody is the right pane's content in naive mode: every stale
// landing, newest last, "when resource writer@fence over newer@fence", or
// how to make one.
func (p *logPane) naiveLogBody(snap *liveview.Snapshot, filter string) (header, body string, shown int) {
	var tw, rw int
	for _, s := range snap.StaleWrites {
		if filter == "" || s.Resource == filter {
			shown++
			tw, rw = max(tw, len(history.FormatDuration(s.At))), max(rw, len(s.Resource))
		}
	}
	header = fmt.Sprintf("%*s %-*s %s", tw, "time", rw, "resource", "landed stale over")
	var b strings.Builder
	for _, s := range snap.StaleWrites {
		if filter != "" && s.Resource != filter {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%*s %-*s %s over %s", tw, history.FormatDuration(s.At), rw, s.Resource,
			p.st.Stale.Render(holderAt(s.Writer, s.Fence)), holderAt(s.Over, s.OverFence))
	}
	return header, b.String(), shown
}

// naiveTitle is the right pane's title in naive mode.
func (p *logPane) naiveTitle() string {
	return p.st.PaneTitle.Render("stale writes") + p.st.Muted.Render(" · naive · ") + p.st.Stale.Render(strconv.Itoa(p.stale)+" landed silently")
}
