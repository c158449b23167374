package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/leasefence/lab/history"
)

//go:embed report.html.tmpl
var pageTemplateText string

var pageTemplate = template.Must(template.New("page").Parse(pageTemplateText))

// Geometry of the page's lanes, in SVG pixels.
const (
	laneLabelW = 84 // the agent names, left of the plot
	laneH      = 26 // one agent's lane
	laneGap    = 8  // between lanes
	axisH      = 30 // the time axis, above the lanes
	bandTop    = 16 // room above the first lane for restart labels
	minPlotW   = 1200
	maxPlotW   = 12000
	pxPerSec   = 100 // the plot is this wide per virtual second, within the bounds above
	// The page fits the run to the window and zooms in from there, down
	// to maxPxPerMS; the axis has labels at least minTickGap apart at
	// any zoom, from a plot as narrow as minFitW.
	maxPxPerMS = 1
	minFitW    = 200
	minTickGap = 90
	// maxTableRows bounds the refusal table of each mode; the lanes keep
	// every mark.
	maxTableRows = 200
)

// pageData is what the template draws.
type pageData struct {
	Scenario, Description  string
	Outline                string // who took part, on which lease terms
	MaxPxPerMS, MinTickGap int    // the zoom's bounds, for the page's script
	Seed                   uint64
	Digest                 string
	Duration               string
	Events                 string
	Interrupted            string
	ModeNames              []string
	Rows                   []pageRow
	Failed                 bool
	Verdict                []string
	// Findings are each contender's three findings, as the checker made
	// them (history.Findings).
	Findings []findingsView
	Modes    []modeView
}

// findingsView is one contender's three findings on the page.
type findingsView struct {
	Name  string
	Parts []findingView
}

type findingView struct {
	Part, Verdict, Reason string
}

type pageRow struct {
	Label  string
	Values []int
	Alarm  bool // the fenced value breaks a promise
}

type modeView struct {
	Name, Summary string
	DurationNS    int64 // the run's length: the page's zoom maps it onto the plot
	Width, Height int
	PlotX0, PlotW string
	LaneH         int
	Ticks         []tickView
	Lanes         []laneView
	RunFaults     []runFaultView // faults of no agent (a restart, an etcd member's), across the lanes
	// Exclusions are the lock's mutual-exclusion violations: each a band
	// on the new holder's lane over the instants the earlier lease still
	// ran, and a row with its evidence below the timeline.
	Exclusions []exclusionView
	Links      []linkView
	Rows       []refusalRow
	MoreRows   int
	// Window says what the page leaves out of a mode that outran its
	// window (its first 100,000 events); "" when it draws the whole mode.
	Window string
	// RefusalsSummary heads the table of Rows, counting MoreRows too.
	RefusalsSummary string
	FloorWord       string // who the refused or stale write lost to: "gate floor raised" or "newer write landed"
}

// tickView is one label of the time axis. Step is the spacing of the
// level of labels it belongs to: the page shows the level that suits its
// zoom.
type tickView struct {
	X, Label string
	Step     int64 // ns
	Base     bool  // of the level shown at the base scale, without the script
}

type laneView struct {
	Agent         string
	Y, Mid, Y2    string
	LabelY        string
	Segs          []segView
	Stalls        []segView
	Faults        []faultView
	Drops         []dropView
	Marks         []markView
	Pushes        []pushView
	BottomOfLanes string
}

type segView struct {
	X, Y, W, H string
	Class      string
	Label      string // drawn inside when there is room
	TextX      string
	TextY      string
	Title      string
}

type faultView struct {
	X, Y, W, H, TextX, TextY string
	Label                    string
}

type dropView struct {
	X, Y1, Y2 string
	Title     string
}

type markView struct {
	ID, Class, Title, Link string
	Kind                   string // "admitted", "refused", "stale"
	X, Y                   string
	// Shapes: a circle at X, Y (admitted), a cross of two strokes
	// X1,Y1-X2,Y2 and X3,Y3-X4,Y4 (refused), a triangle (stale).
	Points                         string
	X1, Y1, X2, Y2, X3, Y3, X4, Y4 string
}

type pushView struct {
	ID, Title, Points string
}

type exclusionView struct {
	ID, X, Y, W, H  string
	At, Until       string
	Holder, Other   string
	Fence, Earlier  uint64
	Resource, Title string
}

// runFaultView is a fault of the whole run: a line across the lanes where it
// began, labelled with its kind, target and span.
type runFaultView struct {
	X, Y1, Y2, TextY, Label string
}

type linkView struct {
	X1, Y1, X2, Y2 string
	Title          string
}

type refusalRow struct {
	ID, At, Agent, Resource, Result string
	Fence                           uint64
	Link, LinkText                  string
}

// px formats a coordinate.
func px(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

// HTML writes the self-contained page of a run from its result and its
// timeline: a summary, then one timeline per mode, naive above fenced.
func HTML(w io.Writer, res *history.Result, tl *Timeline, stop Stop) error {
	h := &tl.header
	data := pageData{
		MaxPxPerMS: maxPxPerMS, MinTickGap: minTickGap,
		Scenario: res.Scenario, Description: h.Description, Outline: h.Outline(), Seed: res.Seed, Digest: res.Digest,
		Duration: history.FormatDuration(h.Duration), Events: history.Plural(res.Events, "event", "events"), Failed: res.Failed(),
	}
	if stop.Interrupted {
		data.Interrupted = fmt.Sprintf("Interrupted at %s of virtual time: the page shows what ran before.", history.FormatDuration(stop.At))
	}
	modes := resultModes(res)
	for _, m := range modes {
		data.ModeNames = append(data.ModeNames, string(m))
	}
	for _, row := range shownRows(res) {
		pr := pageRow{Label: row.label}
		for _, m := range modes {
			v := row.get(res.Modes[m])
			pr.Values = append(pr.Values, v)
			if h.Fenced(m) && v > 0 && (row.label == "stale writes landed" || row.label == "unexplained refusals" ||
				row.label == "forgeries landed" || row.label == "floors moved by forgers") {
				pr.Alarm = true
			}
		}
		data.Rows = append(data.Rows, pr)
	}
	data.Verdict = verdictParagraphs(res)
	for _, m := range modes {
		f := res.Modes[m].Findings
		cover := f.Coverage.Reason
		if f.Coverage.Counts != nil {
			cover += ". " + f.Coverage.Counts.String()
		}
		data.Findings = append(data.Findings, findingsView{Name: string(m), Parts: []findingView{
			{"lock", f.Lock.Verdict, f.Lock.Reason}, {"writes", f.Writes.Verdict, f.Writes.Reason}, {"coverage", f.Coverage.Verdict, cover}}})
	}

	end := h.Duration
	if stop.Interrupted && stop.At > 0 {
		end = stop.At
	}
	for _, m := range modes {
		mt := tl.modes[m]
		if mt == nil {
			continue
		}
		drawn := mt.drawnUntil(end)
		mt.finish(drawn)
		data.Modes = append(data.Modes, buildModeView(h, res.Modes[m], mt, drawn))
	}
	return pageTemplate.Execute(w, data)
}

func buildModeView(h *history.Header, rep *history.Report, mt *modeTimeline, drawn time.Duration) modeView {
	g := newGeometry(h, len(mt.agents), h.Duration)
	if mt.window >= 0 {
		g = newGeometry(h, len(mt.agents), max(drawn, time.Millisecond))
	}
	v := modeView{
		Name: string(mt.mode), DurationNS: int64(g.dur), Width: int(laneLabelW + g.plotW + 36), Height: int(g.height),
		PlotX0: px(laneLabelW), PlotW: px(g.plotW), LaneH: laneH,
		FloorWord: "gate floor raised",
	}
	if !h.Fenced(mt.mode) {
		v.FloorWord = "newer write landed"
	}
	v.Summary = modeSummary(rep)
	v.Window = windowNote(mt, drawn)
	v.Ticks = g.ticks()
	for i := range mt.agents {
		v.Lanes = append(v.Lanes, g.lane(mt, i))
	}
	pos := make(map[string][2]float64) // mark id -> centre, for the links
	g.marks(&v, mt, pos)
	g.pushes(&v, mt, pos)
	for _, w := range mt.writes {
		if w.link == "" {
			continue
		}
		from, to := pos[w.id], pos[w.link]
		v.Links = append(v.Links, linkView{X1: px(from[0]), Y1: px(from[1]), X2: px(to[0]), Y2: px(to[1]),
			Title: fmt.Sprintf("%s's fence %d at %s was refused because of this write", g.agent(w.agent), w.fence, history.FormatDuration(w.at))})
	}
	v.Exclusions = g.exclusions(rep)
	for _, f := range mt.wide {
		when := " at " + history.FormatDuration(f.from)
		if f.to > f.from {
			when = " from " + history.FormatDuration(f.from) + " to " + history.FormatDuration(f.to)
		}
		v.RunFaults = append(v.RunFaults, runFaultView{X: px(g.x(f.from)), Y1: px(axisH + 2), Y2: px(g.height), TextY: px(axisH + 12),
			Label: f.label + when})
	}
	return v
}

// geometry places a mode's timeline on the page: true time on x, one lane
// per agent.
type geometry struct {
	h             *history.Header
	dur           time.Duration
	plotW, height float64
}

// newGeometry places the lanes of a timeline dur long.
func newGeometry(h *history.Header, lanes int, dur time.Duration) *geometry {
	g := &geometry{h: h, dur: dur, plotW: math.Min(math.Max(dur.Seconds()*pxPerSec, minPlotW), maxPlotW)}
	g.height = g.laneTop(lanes) + 4
	return g
}

func (g *geometry) x(t time.Duration) float64 { return laneLabelW + float64(t)/float64(g.dur)*g.plotW }

func (g *geometry) laneTop(i int) float64 { return axisH + bandTop + float64(i)*(laneH+laneGap) }

func (g *geometry) agent(i int) string { return g.h.Agents[i] }

func (g *geometry) resource(i int) string { return g.h.Resources[i] }

// ticks are the time axis's ticks at every step, the base step the first
// one far enough apart to label.
func (g *geometry) ticks() []tickView {
	steps := tickSteps(g.dur)
	base := steps[len(steps)-1]
	for _, s := range steps {
		if float64(s)/float64(g.dur)*g.plotW >= minTickGap {
			base = s
			break
		}
	}
	var ticks []tickView
	for _, step := range steps {
		for t := time.Duration(0); t <= g.dur; t += step {
			ticks = append(ticks, tickView{X: px(g.x(t)), Label: history.FormatDuration(t), Step: int64(step), Base: step == base})
		}
	}
	return ticks
}

// lane draws agent i's lane: its states, stalls, partitions and lost
// messages.
func (g *geometry) lane(mt *modeTimeline, i int) laneView {
	top := g.laneTop(i)
	mid := top + laneH/2
	name := g.agent(i)
	lane := laneView{Agent: name, Y: px(top), Mid: px(mid), Y2: px(top + laneH), LabelY: px(mid + 4), BottomOfLanes: px(g.height)}
	segs := mt.agents[i].segs
	for k, s := range segs {
		next := g.dur
		if k+1 < len(segs) {
			next = segs[k+1].from
		}
		if s.state == history.AgentIdle || next <= s.from {
			continue
		}
		x0, x1 := g.x(s.from), g.x(min(next, g.dur))
		sv := segView{X: px(x0), Y: px(top + 3), W: px(math.Max(x1-x0, 0.5)), H: px(laneH - 6),
			Class: "st-" + stateClass(s.state), TextX: px((x0 + x1) / 2), TextY: px(mid + 4)}
		what := stateWord(s.state)
		if s.resource >= 0 {
			what += fmt.Sprintf(" %s fence %d", g.resource(s.resource), s.fence)
		}
		sv.Title = fmt.Sprintf("%s %s, %s to %s", name, what, history.FormatDuration(s.from), history.FormatDuration(next))
		if x1-x0 > float64(7*len(stateWord(s.state))+8) {
			sv.Label = stateWord(s.state)
		}
		lane.Segs = append(lane.Segs, sv)
	}
	for _, st := range mt.agents[i].stalled {
		x0, x1 := g.x(st[0]), g.x(min(st[1], g.dur))
		lane.Stalls = append(lane.Stalls, segView{X: px(x0), Y: px(top + laneH - 5), W: px(math.Max(x1-x0, 1)), H: "5",
			Class: "st-stalled", Title: fmt.Sprintf("%s stalled from %s to %s", name, history.FormatDuration(st[0]), history.FormatDuration(st[1]))})
	}
	for _, f := range mt.faults {
		if f.agent != i {
			continue
		}
		if f.to > f.from {
			x0, x1 := g.x(f.from), g.x(f.to)
			lane.Faults = append(lane.Faults, faultView{X: px(x0), Y: px(top - 3), W: px(x1 - x0), H: px(laneH + 6),
				TextX: px(x0 + 3), TextY: px(top - 5), Label: fmt.Sprintf("%s %s to %s", f.label, history.FormatDuration(f.from), history.FormatDuration(f.to))})
			continue
		}
		lane.Drops = append(lane.Drops, dropView{X: px(g.x(f.from)), Y1: px(top - 3), Y2: px(top + 5),
			Title: fmt.Sprintf("%s: %s at %s", name, f.label, history.FormatDuration(f.from))})
	}
	return lane
}

// exclusions places the report's mutual-exclusion violations: a band on
// the lane of the holder granted the resource, from the grant to the end
// of the earlier lease it overlapped, its evidence in the title.
func (g *geometry) exclusions(rep *history.Report) []exclusionView {
	var out []exclusionView
	for _, x := range rep.Counterexamples {
		if x.Kind != history.MutualExclusionViolation {
			continue
		}
		lane := slices.Index(g.h.Agents, x.Holder)
		if lane < 0 {
			continue
		}
		at, until := time.Duration(x.AtMS*float64(time.Millisecond)), time.Duration(x.UntilMS*float64(time.Millisecond))
		x0, x1 := g.x(at), g.x(min(max(until, at), g.dur))
		top := g.laneTop(lane)
		out = append(out, exclusionView{ID: fmt.Sprintf("%s-exclusion-%d", rep.Mode, len(out)+1), X: px(x0), Y: px(top + 1), W: px(math.Max(x1-x0, 2)), H: px(laneH - 2),
			At: history.FormatMS(x.AtMS), Until: history.FormatMS(x.UntilMS), Holder: x.Holder, Other: x.Other,
			Fence: uint64(x.Fence), Earlier: uint64(x.OtherFence), Resource: x.Resource, Title: "mutual exclusion broken: " + x.Detail})
	}
	return out
}

// marks draws every write on its writer's lane, and lists the refused and
// stale ones in the table below, recording each mark's centre in pos.
func (g *geometry) marks(v *modeView, mt *modeTimeline, pos map[string][2]float64) {
	rows := 0
	for _, w := range mt.writes {
		cx, cy := g.x(w.at), g.laneTop(w.agent)+laneH/2
		pos[w.id] = [2]float64{cx, cy}
		mv := markView{ID: w.id, X: px(cx), Y: px(cy), Link: w.link}
		where := fmt.Sprintf("%s wrote %s with fence %d at %s", g.agent(w.agent), g.resource(w.resource), w.fence, history.FormatDuration(w.at))
		switch w.kind {
		case history.MarkAdmitted:
			mv.Kind, mv.Class = "admitted", "mark-admitted"
			mv.Title = where + ": landed"
		case history.MarkRefused:
			mv.Kind, mv.Class = "refused", "mark-refused"
			mv.Title = where + fmt.Sprintf(": REFUSED by the gate, whose floor %s had raised to fence %d", agentOrNone(g.h, w.other), w.otherFence)
			const r = 5
			mv.X1, mv.Y1, mv.X2, mv.Y2 = px(cx-r), px(cy-r), px(cx+r), px(cy+r)
			mv.X3, mv.Y3, mv.X4, mv.Y4 = px(cx-r), px(cy+r), px(cx+r), px(cy-r)
		case history.MarkStale:
			mv.Kind, mv.Class = "stale", "mark-stale"
			mv.Title = where + fmt.Sprintf(": STALE, landed after %s's fence %d, with no error", agentOrNone(g.h, w.other), w.otherFence)
			mv.Points = fmt.Sprintf("%s,%s %s,%s %s,%s", px(cx), px(cy-7), px(cx-6), px(cy+5), px(cx+6), px(cy+5))
		}
		lane := &v.Lanes[w.agent]
		lane.Marks = append(lane.Marks, mv)
		if w.kind == history.MarkAdmitted {
			continue
		}
		if rows < maxTableRows {
			row := refusalRow{ID: w.id + "-row", At: history.FormatDuration(w.at), Agent: g.agent(w.agent),
				Resource: g.resource(w.resource), Fence: w.fence, Result: mv.Kind, Link: w.link}
			row.LinkText = fmt.Sprintf("%s fence %d", agentOrNone(g.h, w.other), w.otherFence)
			v.Rows = append(v.Rows, row)
		} else {
			v.MoreRows++
		}
		rows++
	}
	v.RefusalsSummary = refusalsSummary(len(v.Rows), v.MoreRows)
}

// pushes draws each push that raised a gate's floor on its holder's lane.
func (g *geometry) pushes(v *modeView, mt *modeTimeline, pos map[string][2]float64) {
	for _, p := range mt.pushes {
		if !p.applied {
			continue
		}
		cx, cy := g.x(p.at), g.laneTop(p.agent)+3
		pos[p.id] = [2]float64{cx, cy}
		v.Lanes[p.agent].Pushes = append(v.Lanes[p.agent].Pushes, pushView{ID: p.id,
			Title:  fmt.Sprintf("push (Admit) of %s's fence %d reached %s's gate at %s", g.agent(p.agent), p.fence, g.resource(p.resource), history.FormatDuration(p.at)),
			Points: fmt.Sprintf("%s,%s %s,%s %s,%s %s,%s", px(cx), px(cy-4), px(cx+4), px(cy), px(cx), px(cy+4), px(cx-4), px(cy))})
	}
}

func agentOrNone(h *history.Header, i int) string {
	if i < 0 || i >= len(h.Agents) {
		return "no holder"
	}
	return h.Agents[i]
}

func stateClass(s history.AgentState) string {
	switch s {
	case history.AgentWaiting:
		return "waiting"
	case history.AgentHolding:
		return "holding"
	case history.AgentStalled:
		return "stalled"
	case history.AgentZombie:
		return "zombie"
	}
	return "idle"
}

func stateWord(s history.AgentState) string {
	switch s {
	case history.AgentZombie:
		return "believes expired lease"
	case history.AgentHolding:
		return "holding"
	}
	return s.String()
}

// modeSummary is the line under a mode's heading on the page.
func modeSummary(rep *history.Report) string {
	return fmt.Sprintf("%s, %s admitted, %d refused, %s landed, %s (%d silent)",
		history.Plural(rep.Acquisitions, "acquisition", "acquisitions"), history.Plural(rep.CommitsAdmitted, "write", "writes"),
		rep.CommitsRefused, history.Plural(rep.StaleWritesLanded, "stale write", "stale writes"),
		history.Plural(rep.Overlaps, "overlap", "overlaps"), rep.SilentOverlaps)
}

// refusalsSummary heads a mode's table of refused and stale writes: shown
// rows, and more not shown.
func refusalsSummary(shown, more int) string {
	s := strconv.Itoa(shown)
	if more > 0 {
		s += fmt.Sprintf(" (and %d more)", more)
	}
	if shown+more == 1 {
		return s + " write refused or landed stale, with the newer write it lost to"
	}
	return s + " writes refused or landed stale, each with the newer write it lost to"
}

// tickSteps are the 1-2-5 spacings of axis labels the page may show:
// from the finest that puts labels minTickGap apart at the deepest zoom
// (maxPxPerMS) to the coarsest that does so with the run fitted into
// minFitW pixels. The page picks the finest that fits its zoom.
func tickSteps(dur time.Duration) []time.Duration {
	finest := time.Duration(float64(time.Millisecond) * minTickGap / maxPxPerMS)
	coarsest := time.Duration(float64(dur) * minTickGap / minFitW)
	var steps []time.Duration
	for step := time.Millisecond; ; step *= 10 {
		for _, k := range []time.Duration{1, 2, 5} {
			s := step * k
			if s < finest {
				continue
			}
			steps = append(steps, s)
			if s >= coarsest {
				return steps
			}
		}
	}
}

// windowNote says what the page draws of a mode that outran its window,
// and counts what it leaves out; "" when it draws all of it.
func windowNote(mt *modeTimeline, drawn time.Duration) string {
	if mt.window < 0 {
		return ""
	}
	a := mt.after
	return fmt.Sprintf("This timeline draws the first %s of the mode (its first %d events). After it, %s (%d refused), %s and %s "+
		"are counted, not drawn: %s in all. The counters above are the checker's, of the whole history.",
		history.FormatDuration(drawn), mt.drawn, history.Plural(a.writes, "write", "writes"), a.refused,
		history.Plural(a.pushes, "push", "pushes"), history.Plural(a.faults, "fault", "faults"), history.Plural(a.events, "event", "events"))
}
