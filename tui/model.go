package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// Smallest terminal the dashboard draws in.
const (
	MinWidth  = 80
	MinHeight = 24
)

// Model is the dashboard as a tea.Model. Update is fast and never touches
// the Live: it queues the person's controls, and one tea.Cmd at a time
// applies them and snapshots every mode. View only assembles panes that
// were formatted when their data or size changed, and depends on nothing
// but the model: virtual time, speed and pause, never the wall clock.
type Model struct {
	live   Source
	tick   time.Duration
	manual bool // no ticker: the tests send every frame themselves
	info   runInfo
	keys   keyMap
	help   help.Model
	st     *styles

	width, height int
	sized         bool

	snaps []liveview.Snapshot // one per mode of info.modes, nil before the first
	focus int                 // the mode in view, an index into info.modes
	// against is the mode the strip compares the one in view with (an
	// index into info.modes, never focus while there are two or more; -1
	// for a run of one): c picks the next.
	against int
	paused  bool
	done    bool
	// realTime: the run cannot pause (Source.RealTime), so space freezes
	// the picture instead: frozen holds snaps as they were at frozenAt
	// while the run goes on, and runNow is where the run is. Once live
	// again, the timeline marks each interval in unwatched, so a person
	// knows the run went on behind the frozen picture.
	realTime, frozen bool
	frozenAt, runNow time.Duration
	unwatched        []span
	// pauseAtRefusal: pause by itself once, at the first refused (or, in
	// naive mode, stale) write; firstSeen: that moment has been seen.
	pauseAtRefusal, firstSeen bool
	speed                     float64
	drop                      float64 // the drop rate once the queued ops are applied

	sel    selection
	filter int // the log's resource, or -1 for all

	status    string
	statusErr bool

	queue []op // controls not yet sent to the Live
	busy  bool // a work command is in flight
	dirty bool // a frame came while busy: snapshot again when it returns

	gatesWidth int
	// The most lines the holders and the gates-and-log row have wanted:
	// spare lines go back to them before the timeline takes the rest, so
	// a holder row that comes and goes does not shake the panes below.
	holdersMost, midMost int
	helpView             string
	footerFor            footerKey // what helpView was drawn for
	mid                  string    // the gates and the log side by side
	header               headerPane
	strip                stripPane
	holders              holdersPane
	gates                gatesPane
	log                  logPane
	timeline             timelinePane
}

var _ tea.Model = Model{}

// New builds the dashboard for live, which must not be nil. It does not
// start the Live's pacing (Run does, or the caller) and needs no terminal:
// it draws nothing until the first tea.WindowSizeMsg. An out-of-range
// Options.Tick is clamped into [MinTick, MaxTick]; Validate reports it.
func New(live Source, opts Options) Model {
	h := live.Header()
	var drop float64
	if modes := live.Modes(); len(modes) > 0 {
		if snap, ok := live.Snapshot(modes[0]); ok {
			drop = snap.DropRate
		}
	}
	st := defaultStyles()
	m := Model{
		live: live, tick: opts.tick(), keys: defaultKeys(live.RealTime()), help: help.New(), st: st, filter: -1, realTime: live.RealTime(),
		info:  runInfo{name: history.Printable(h.Scenario), seed: h.Seed, agents: len(h.Agents), resources: len(h.Resources), ttl: h.TTL, modes: live.Modes()},
		speed: live.Speed(), paused: live.Paused(), drop: drop, pauseAtRefusal: opts.PauseAtFirstRefusal,
		holders: newHoldersPane(st), gates: newGatesPane(st, h.Agents, h.Resources), log: logPane{st: st}, timeline: newTimelinePane(st),
	}
	m.help.Styles = st.Help
	m.header = headerPane{st: st, info: m.info}
	m.strip = stripPane{st: st}
	for i, md := range m.info.modes {
		if h.Fenced(md) {
			m.focus = i // fenced first: it is the mode with something to show
		}
	}
	m.against = -1
	for i, md := range m.info.modes {
		if i != m.focus && (m.against < 0 || !h.Fenced(md) && h.Fenced(m.info.modes[m.against])) {
			m.against = i // a naive one first: the comparison the lab is for
		}
	}
	return m
}

// nextAgainst is the mode after from to compare the one in view with:
// any but the one in view, in turn.
func (m *Model) nextAgainst(from int) int {
	n := len(m.info.modes)
	if n < 2 {
		return -1
	}
	for i := 1; i <= n; i++ {
		if c := (from + i) % n; c != m.focus {
			return c
		}
	}
	return -1
}

// Init asks for the first frame at once; the ticker takes over from there.
func (m Model) Init() tea.Cmd {
	return func() tea.Msg { return frameMsg{} }
}

// Update handles a message. It is fast: the Live is only touched by the
// command it returns.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height, m.sized = msg.Width, msg.Height, true
		m.layout() // refreshPanes lays out again once there is a snapshot
		m.refreshPanes()
		return m, nil
	case frameMsg:
		var next tea.Cmd
		if !m.manual {
			next = tea.Every(m.tick, func(time.Time) tea.Msg { return frameMsg{} })
		}
		if msg.advance > 0 {
			m.queue = append(m.queue, op{kind: opAdvance, d: msg.advance})
		}
		return m, tea.Batch(next, m.launch())
	case workMsg:
		m.busy = false
		m.absorb(msg)
		if len(m.queue) > 0 || m.dirty {
			return m, m.launch()
		}
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

// launch sends the queued ops to the Live, unless a round is already in
// flight; then the queue waits for it, and so does the frame.
func (m *Model) launch() tea.Cmd {
	if m.busy {
		m.dirty = true
		return nil
	}
	ops := m.queue
	m.queue, m.busy, m.dirty = nil, true, false
	var last time.Duration
	if m.snaps != nil {
		last = m.snaps[m.focus].Now
	}
	return work(m.live, m.info.modes, ops, last, m.snaps != nil, m.frozen, m.pauseAtRefusal && !m.firstSeen)
}

// enqueue queues an op and launches it if nothing is in flight.
func (m Model) enqueue(o op) (tea.Model, tea.Cmd) {
	m.queue = append(m.queue, o)
	return m, m.launch()
}

// absorb takes in what a round of work saw.
func (m *Model) absorb(msg workMsg) {
	m.paused, m.speed, m.runNow = msg.paused, msg.speed, msg.now
	if msg.err != nil {
		m.status, m.statusErr = "error: "+msg.err.Error(), true
	} else if msg.status != "" {
		m.status, m.statusErr = msg.status, false
	}
	if msg.heldSeen {
		m.firstSeen = true
	}
	if msg.held != "" {
		m.status, m.statusErr = msg.held, false
	}
	if m.frozen {
		msg.snaps = nil // a round launched before the freeze: the picture stays
	}
	if msg.snaps != nil {
		m.snaps = msg.snaps
		m.done = true
		for i := range m.snaps {
			m.done = m.done && m.snaps[i].Done
		}
		if !hasDropOp(m.queue) {
			m.drop = m.snaps[m.focus].DropRate
		}
		if msg.freeze {
			m.frozen, m.frozenAt = true, m.snaps[m.focus].Now
		}
	}
	m.refreshPanes()
}

// firstRefusalNote is the line that says why the run paused itself (or,
// in real time, why the picture froze): the first refused write, or the
// first stale one landed, or "" for neither.
func firstRefusalNote(snaps []liveview.Snapshot, realTime bool) string {
	// Why and how to go on come first: the details may be cut on a narrow
	// terminal, and the rejection log has them.
	held, next := "paused at the first ", " · space resumes, n steps · "
	if realTime {
		held, next = "view frozen at the first ", " (the run goes on) · space: live view · "
	}
	stale := ""
	for i := range snaps {
		s := &snaps[i]
		if len(s.Refusals) > 0 {
			r := s.Refusals[0]
			return held + "refusal" + next + fmt.Sprintf("%s@%d refused by %s's gate (floor %s@%d) at %s",
				r.Holder, r.Fence, r.Resource, r.FloorHolder, r.FloorFence, history.FormatDuration(r.At))
		}
		if s.Totals.StaleWritesLanded > 0 && stale == "" {
			stale = held + "stale write" + next + "it landed in " + string(s.Mode) + " mode, with no gate to refuse it"
		}
	}
	for i := range snaps {
		if snaps[i].Fenced {
			return "" // a gate is running: wait for its refusal, a moment after the stale landing
		}
	}
	return stale
}

func hasDropOp(ops []op) bool {
	for _, o := range ops {
		if o.kind == opIntervene && o.iv.Kind == history.SetDropRate {
			return true
		}
	}
	return false
}

// key handles a key press.
func (m Model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
		m.layout()
		m.refreshPanes()
	case key.Matches(msg, k.Pause) && m.realTime:
		return m.freeze()
	case key.Matches(msg, k.Pause):
		return m.enqueue(op{kind: opPause})
	case key.Matches(msg, k.Faster):
		return m.enqueue(op{kind: opSpeed, factor: 2})
	case key.Matches(msg, k.Slower):
		return m.enqueue(op{kind: opSpeed, factor: 0.5})
	case key.Matches(msg, k.Step) && m.realTime:
		m.status, m.statusErr = "a real-time run cannot step: its lock servers keep their own time", true
	case key.Matches(msg, k.Step):
		return m.enqueue(op{kind: opStep, mode: m.info.modes[m.focus]})
	case key.Matches(msg, k.Up):
		m.choose(m.holders.cursor - 1)
	case key.Matches(msg, k.Down):
		m.choose(m.holders.cursor + 1)
	case key.Matches(msg, k.Top):
		m.choose(0)
	case key.Matches(msg, k.Bottom):
		m.choose(math.MaxInt)
	case key.Matches(msg, k.Stall):
		return m.stall()
	case key.Matches(msg, k.DropUp), key.Matches(msg, k.DropDown):
		step := 0.05
		if key.Matches(msg, k.DropDown) {
			step = -step
		}
		m.drop = math.Round(min(max(m.drop+step, 0), 1)*100) / 100
		return m.enqueue(op{kind: opIntervene, iv: history.Intervention{Kind: history.SetDropRate, Value: m.drop},
			what: fmt.Sprintf("drop rate set to %.2f", m.drop)})
	case key.Matches(msg, k.Restart), key.Matches(msg, k.RestartKeep):
		persist := key.Matches(msg, k.RestartKeep)
		what := "coordinator restarted, fence counter lost"
		if persist {
			what = "coordinator restarted from its last fence"
		}
		return m.enqueue(op{kind: opIntervene, iv: history.Intervention{Kind: history.RestartCoordinator, Persist: persist}, what: what})
	case key.Matches(msg, k.Push):
		return m.enqueue(op{kind: opIntervene, iv: history.Intervention{Kind: history.TogglePush}, what: "gate push toggled"})
	case key.Matches(msg, k.View):
		m.focus = (m.focus + 1) % len(m.info.modes)
		if m.against == m.focus {
			m.against = m.nextAgainst(m.focus)
		}
		m.status, m.statusErr = "view: "+string(m.info.modes[m.focus]), false
		m.refreshPanes()
	case key.Matches(msg, k.Compare):
		if len(m.info.modes) < 3 {
			m.status, m.statusErr = "the strip compares the run's two contenders already", false
			break
		}
		m.against = m.nextAgainst(m.against)
		m.status, m.statusErr = "comparing "+string(m.info.modes[m.focus])+" with "+string(m.info.modes[m.against]), false
		m.refreshPanes()
	case key.Matches(msg, k.Filter):
		m.filter++
		if m.filter >= m.info.resources {
			m.filter = -1
		}
		m.refreshPanes()
	case key.Matches(msg, k.LogUp):
		m.log.scroll(-max(m.log.vp.Height-1, 1))
		m.mid = sideBySide(m.gates.View(), m.log.View(), m.gatesWidth)
	case key.Matches(msg, k.LogDown):
		m.log.scroll(max(m.log.vp.Height-1, 1))
		m.mid = sideBySide(m.gates.View(), m.log.View(), m.gatesWidth)
	}
	return m, nil
}

// span is an interval of the run's time, [from, to).
type span struct{ from, to time.Duration }

// maxUnwatched bounds the intervals kept for the timeline's marks: older
// ones have long left its window.
const maxUnwatched = 64

// freeze holds the picture of a real-time run, or lets it go live again.
// The run itself goes on either way (see Source.RealTime): the header
// says FROZEN and where the run is, and once live the timeline marks the
// interval the picture was held over.
func (m Model) freeze() (tea.Model, tea.Cmd) {
	if m.snaps == nil {
		return m, nil // nothing drawn yet: nothing to hold
	}
	if !m.frozen {
		m.frozen, m.frozenAt = true, m.snaps[m.focus].Now
		m.status, m.statusErr = fmt.Sprintf("view frozen at %s; the run goes on: a real-time run cannot pause, its locks keep their own time",
			history.FormatDuration(m.frozenAt)), false
		m.refreshPanes()
		return m, nil
	}
	m.frozen = false
	end := max(m.runNow, m.frozenAt)
	if len(m.unwatched) == maxUnwatched {
		m.unwatched = slices.Delete(m.unwatched, 0, 1)
	}
	m.unwatched = append(m.unwatched, span{m.frozenAt, end})
	m.status, m.statusErr = fmt.Sprintf("live view again: the run went on %s-%s while the view was frozen (= on the timeline)",
		history.FormatDuration(m.frozenAt), history.FormatDuration(end)), false
	return m, m.launch()
}

// choose moves the cursor to row i: the person's selection, which stays
// on that agent until they move it.
func (m *Model) choose(i int) {
	m.sel = m.holders.moveTo(i)
	m.sel.chosen = true
	m.refreshPanes()
}

// stall stalls the selected agent for two TTLs: long enough for its lease
// to expire under it and pass to another agent, so its next write is
// stale. It is the agent the person chose, never one that happens to have
// taken its row.
func (m Model) stall() (tea.Model, tea.Cmd) {
	row, ok := m.holders.selected()
	switch {
	case m.frozen:
		// The rows are as they were when the view froze: their holder may
		// have let go since.
		m.status, m.statusErr = "the view is frozen: space returns to the live view, to stall a holder as it is now", true
		return m, nil
	case ok && m.sel.chosen && m.sel.agent != "" && row.agent != m.sel.agent:
		m.status, m.statusErr = m.sel.agent+" holds no lease now: nothing to stall (select a row with a holder)", true
		return m, nil
	case !ok || row.agent == "":
		name := "nothing"
		if ok {
			name = row.name + " is free"
		}
		m.status, m.statusErr = "no holder to stall ("+name+"): select a row with a holder", true
		return m, nil
	}
	d := 2 * m.info.ttl
	return m.enqueue(op{kind: opIntervene, iv: history.Intervention{Kind: history.StallAgent, Agent: row.agent, Duration: d},
		what: fmt.Sprintf("stalled %s (%s@%d) for %s", row.agent, row.name, row.fence, history.FormatDuration(d))})
}

// layout sizes every pane for the terminal and what there is to show.
// The holders and the gates-and-log row get the lines their content
// needs, the timeline its lanes, sharing a line at a time when the screen
// is short; whatever is left goes to the timeline. So a pane is never cut
// while another has lines to spare.
func (m *Model) layout() {
	if m.width < MinWidth || m.height < MinHeight {
		return
	}
	if f := (footerKey{m.width, m.help.ShowAll}); f != m.footerFor {
		m.helpView, m.footerFor = m.footer(), f
	}
	body := m.height - 4 - 1 - lipgloss.Height(m.helpView) // header and strip; status line; help
	hold, mid, lanes, marks := 1, 3, m.info.agents, 0
	if m.snaps != nil {
		snap := &m.snaps[m.focus]
		hold, mid, lanes = m.holders.lines(), max(gatesLines(snap), m.log.lines()), len(snap.Lanes)
		if len(unwatchedIn(m.unwatched, snap)) > 0 {
			marks = 1 // the row that marks the unwatched intervals
		}
	}
	m.holdersMost, m.midMost = max(m.holdersMost, hold), max(m.midMost, mid)
	sh := share(body, hold, mid, lanes+2+marks, m.holdersMost, m.midMost)
	if sh.timeline < lanes+2+marks {
		// Not every agent gets a lane: fold them into one per resource.
		sh = share(body, hold, mid, m.info.resources+2+marks, m.holdersMost, m.midMost)
	}
	m.gatesWidth = min(m.gates.want, m.width/2)
	m.header.SetSize(m.width, 3)
	m.strip.SetSize(m.width, 1)
	m.holders.SetSize(m.width, sh.holders)
	m.gates.SetSize(m.gatesWidth, sh.mid)
	m.log.SetSize(m.width-m.gatesWidth-1, sh.mid)
	m.timeline.SetSize(m.width, sh.timeline)
}

// minPaneLines is the least a pane is given: its title, the column
// headers (or the timeline's legend) and one row.
const minPaneLines = 3

// shares is how many lines each part of the body gets.
type shares struct{ holders, mid, timeline int }

// share divides body lines among the holders, the gates and log, and the
// timeline, which want the lines given (each at least minPaneLines). When
// they want more than there is, the lines go round one at a time,
// timeline, holders, gates and log, so each shows as much as any other
// can. Lines left over go first to the holders and the gates and log, up
// to the most they have wanted (holdMost, midMost), then to the timeline.
func share(body, hold, mid, tl, holdMost, midMost int) shares {
	s := shares{minPaneLines, minPaneLines, minPaneLines}
	extra := body - 3*minPaneLines
	for extra > 0 && (s.timeline < tl || s.holders < hold || s.mid < mid) {
		if s.timeline < tl && extra > 0 {
			s.timeline, extra = s.timeline+1, extra-1
		}
		if s.holders < hold && extra > 0 {
			s.holders, extra = s.holders+1, extra-1
		}
		if s.mid < mid && extra > 0 {
			s.mid, extra = s.mid+1, extra-1
		}
	}
	if more := min(max(holdMost-s.holders, 0), extra); more > 0 {
		s.holders, extra = s.holders+more, extra-more
	}
	if more := min(max(midMost-s.mid, 0), extra); more > 0 {
		s.mid, extra = s.mid+more, extra-more
	}
	// The rest goes to the rejection log, which grows into it as writes
	// are refused; the timeline has a line per lane and nothing to put in
	// more.
	s.mid += max(extra, 0)
	return s
}

// footer is the help: the full screen of keys, or one line of the keys
// that fit the width, always ending with "? help" and "q quit" so the way
// to the rest is never cut off.
func (m *Model) footer() string {
	if m.help.ShowAll {
		m.help.Width = m.width
		return m.help.View(m.keys)
	}
	m.help.Width = 0 // the bindings are chosen to fit: nothing to truncate
	last := []key.Binding{m.keys.Help, m.keys.Quit}
	var shown []key.Binding
	for _, b := range m.keys.ShortHelp() {
		if slices.ContainsFunc(last, func(l key.Binding) bool { return slices.Equal(l.Keys(), b.Keys()) }) {
			continue
		}
		if lipgloss.Width(m.help.ShortHelpView(slices.Concat(shown, []key.Binding{b}, last))) > m.width {
			break
		}
		shown = append(shown, b)
	}
	return m.help.ShortHelpView(append(shown, last...))
}

// footerKey is what the footer depends on, so it is drawn only when that
// changes, not on every frame.
type footerKey struct {
	width   int
	showAll bool
}

// refreshPanes formats every pane from the focused snapshot. The holders
// and the log take their content first, for the layout to size the panes
// by it; the gates and the timeline are drawn into the sizes given.
func (m *Model) refreshPanes() {
	if m.snaps == nil || !m.sized || m.width < MinWidth || m.height < MinHeight {
		return
	}
	snap := &m.snaps[m.focus]
	shown := m.holders.setSnapshot(snap, m.sel)
	if !m.sel.chosen {
		m.sel = selection{res: shown.res} // nobody chosen: the first row, whoever holds it
	}
	filter := ""
	if m.filter >= 0 && m.filter < len(snap.Holders) {
		filter = snap.Holders[m.filter].Resource
	}
	m.log.setSnapshot(snap, filter)
	m.layout()
	m.gates.setSnapshot(snap, shown)
	m.timeline.setSnapshot(snap, shown, unwatchedIn(m.unwatched, snap))
	m.header.set(snap, m.info.modes[m.focus], m.clock())
	m.strip.set(m.info.modes, m.snaps, m.focus, m.against)
	m.mid = sideBySide(m.gates.View(), m.log.View(), m.gatesWidth)
}

// clock is what the header says of the run's time.
func (m *Model) clock() clock {
	c := clock{paused: m.paused, done: m.done, speed: m.speed}
	if m.frozen {
		c.frozen, c.runNow = true, max(m.runNow, m.frozenAt)
	}
	return c
}

// View draws the dashboard, or one line saying the terminal is too small.
// It only joins what the panes drew when their data or size last changed.
func (m Model) View() string {
	if !m.sized {
		return ""
	}
	if m.width < MinWidth || m.height < MinHeight {
		return fmt.Sprintf("terminal too small: need %dx%d, have %dx%d", MinWidth, MinHeight, m.width, m.height)
	}
	if m.snaps == nil {
		return "waiting for the first snapshot…"
	}
	var b strings.Builder
	b.WriteString(m.header.View())
	b.WriteByte('\n')
	b.WriteString(m.strip.View())
	b.WriteByte('\n')
	b.WriteString(m.holders.View())
	b.WriteByte('\n')
	b.WriteString(m.mid)
	b.WriteByte('\n')
	b.WriteString(m.timeline.View())
	b.WriteByte('\n')
	b.WriteString(m.statusLine())
	b.WriteByte('\n')
	b.WriteString(m.helpView)
	return b.String()
}

// statusLine is what the last control did, and what is selected.
func (m Model) statusLine() string {
	right := ""
	if row, ok := m.holders.selected(); ok {
		if m.sel.chosen && m.sel.agent != "" && row.agent != m.sel.agent {
			right = "selected " + m.sel.agent + " (no lease now)"
		} else if row.agent != "" {
			right = fmt.Sprintf("selected %s on %s", row.agent, row.name)
		} else {
			right = "selected " + row.name + " (free)"
		}
	}
	left := m.status
	switch {
	case m.done && (left == "" || strings.HasPrefix(left, "resumed at ") || strings.HasPrefix(left, "paused at ")):
		// A finished run neither resumes nor pauses: say it ended.
		left = "the run has ended · q quits"
	case left == "" && m.pauseAtRefusal && !m.firstSeen && m.realTime:
		left = "watching for the first stale write: the view freezes there by itself (a real-time run goes on)"
	case left == "" && m.pauseAtRefusal && !m.firstSeen:
		// Until the first refusal, which pauses the run by itself, a stall
		// of the user's would only get in its way.
		left = "watching for the first stale write: the run pauses there by itself"
	case left == "":
		left = "s stalls the selected holder past its TTL"
	}
	style := m.st.StatusOK
	if m.statusErr {
		style = m.st.StatusErr
	}
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 2 {
		return cut(style.Render(left), m.width)
	}
	return style.Render(left) + strings.Repeat(" ", gap) + m.st.Muted.Render(right)
}

// sideBySide joins two blocks of the same height, the left padded to
// leftWidth, with one space between.
func sideBySide(left, right string, leftWidth int) string {
	ls, rs := strings.Split(left, "\n"), strings.Split(right, "\n")
	var b strings.Builder
	for i := range max(len(ls), len(rs)) {
		if i > 0 {
			b.WriteByte('\n')
		}
		l := ""
		if i < len(ls) {
			l = ls[i]
		}
		b.WriteString(l)
		b.WriteString(strings.Repeat(" ", max(leftWidth-ansi.StringWidth(l), 0)+1))
		if i < len(rs) {
			b.WriteString(rs[i])
		}
	}
	return b.String()
}
