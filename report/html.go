package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
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
	// maxTableRows bounds the refusal table of each mode; the lanes keep
	// every mark.
	maxTableRows = 200
)

// pageData is what the template draws.
type pageData struct {
	Scenario, Description string
	Seed                  uint64
	Digest                string
	Duration              string
	Events                uint64
	Interrupted           string
	ModeNames             []string
	Rows                  []pageRow
	Failed                bool
	Verdict               []string
	Modes                 []modeView
}

type pageRow struct {
	Label  string
	Values []int
	Alarm  bool // the fenced value breaks a promise
}

type modeView struct {
	Name, Summary string
	Width, Height int
	PlotX0, PlotW string
	LaneH         int
	Ticks         []tickView
	Lanes         []laneView
	Restarts      []restartView
	Links         []linkView
	Rows          []refusalRow
	MoreRows      int
	FloorWord     string // who the refused or stale write lost to: "gate floor raised" or "newer write landed"
}

type tickView struct {
	X, Label string
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

type restartView struct {
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

// msText writes an instant in milliseconds, to a tenth.
func msText(d time.Duration) string {
	return strconv.FormatFloat(math.Round(float64(d)/float64(time.Millisecond/10))/10, 'f', -1, 64) + "ms"
}

// HTML writes the self-contained page of a run from its result and its
// timeline: a summary, then one timeline per mode, naive above fenced.
func HTML(w io.Writer, res *history.Result, tl *Timeline, stop Stop) error {
	h := &tl.header
	data := pageData{
		Scenario: res.Scenario, Description: h.Description, Seed: res.Seed, Digest: res.Digest,
		Duration: h.Duration.String(), Events: res.Events, Failed: res.Failed(),
	}
	if stop.Interrupted {
		data.Interrupted = fmt.Sprintf("Interrupted at %v of virtual time: the page shows what ran before.", stop.At)
	}
	modes := resultModes(res)
	for _, m := range modes {
		data.ModeNames = append(data.ModeNames, string(m))
	}
	for _, row := range reportRows {
		pr := pageRow{Label: row.label}
		for _, m := range modes {
			v := row.get(res.Modes[m])
			pr.Values = append(pr.Values, v)
			if m == history.Fenced && v > 0 && (row.label == "stale writes landed" || row.label == "unexplained refusals") {
				pr.Alarm = true
			}
		}
		data.Rows = append(data.Rows, pr)
	}
	data.Verdict = verdictParagraphs(res)

	end := h.Duration
	if stop.Interrupted && stop.At > 0 {
		end = stop.At
	}
	for _, m := range modes {
		mt := tl.modes[m]
		if mt == nil {
			continue
		}
		mt.finish(end)
		data.Modes = append(data.Modes, buildModeView(h, res.Modes[m], mt))
	}
	return pageTemplate.Execute(w, data)
}

func buildModeView(h *history.Header, rep *history.Report, mt *modeTimeline) modeView {
	dur := h.Duration
	agentName := func(i int) string { return h.Agents[i] }
	resourceName := func(i int) string { return h.Resources[i] }
	plotW := math.Min(math.Max(dur.Seconds()*pxPerSec, minPlotW), maxPlotW)
	x := func(t time.Duration) float64 { return laneLabelW + float64(t)/float64(dur)*plotW }
	laneTop := func(i int) float64 { return axisH + bandTop + float64(i)*(laneH+laneGap) }
	height := laneTop(len(mt.agents)) + 4
	v := modeView{
		Name: string(mt.mode), Width: int(laneLabelW + plotW + 36), Height: int(height),
		PlotX0: px(laneLabelW), PlotW: px(plotW), LaneH: laneH,
		FloorWord: "gate floor raised",
	}
	if mt.mode == history.Naive {
		v.FloorWord = "newer write landed"
	}
	v.Summary = fmt.Sprintf("%d acquisitions, %d writes admitted, %d refused, %d stale writes landed, %d overlaps (%d silent)",
		rep.Acquisitions, rep.CommitsAdmitted, rep.CommitsRefused, rep.StaleWritesLanded, rep.Overlaps, rep.SilentOverlaps)

	step := tickStep(dur, plotW)
	for t := time.Duration(0); t <= dur; t += step {
		v.Ticks = append(v.Ticks, tickView{X: px(x(t)), Label: tickLabel(t, step)})
	}

	pos := make(map[string][2]float64) // mark id -> centre, for the links
	for i := range mt.agents {
		top := laneTop(i)
		mid := top + laneH/2
		name := agentName(i)
		lane := laneView{Agent: name, Y: px(top), Mid: px(mid), Y2: px(top + laneH), LabelY: px(mid + 4)}
		segs := mt.agents[i].segs
		for k, s := range segs {
			next := dur
			if k+1 < len(segs) {
				next = segs[k+1].from
			}
			if s.state == history.AgentIdle || next <= s.from {
				continue
			}
			x0, x1 := x(s.from), x(min(next, dur))
			sv := segView{X: px(x0), Y: px(top + 3), W: px(math.Max(x1-x0, 0.5)), H: px(laneH - 6),
				Class: "st-" + stateClass(s.state), TextX: px((x0 + x1) / 2), TextY: px(mid + 4)}
			what := stateWord(s.state)
			if s.resource >= 0 {
				what += fmt.Sprintf(" %s fence %d", resourceName(s.resource), s.fence)
			}
			sv.Title = fmt.Sprintf("%s %s, %s to %s", name, what, msText(s.from), msText(next))
			if x1-x0 > float64(7*len(stateWord(s.state))+8) {
				sv.Label = stateWord(s.state)
			}
			lane.Segs = append(lane.Segs, sv)
		}
		for _, st := range mt.agents[i].stalled {
			x0, x1 := x(st[0]), x(min(st[1], dur))
			lane.Stalls = append(lane.Stalls, segView{X: px(x0), Y: px(top + laneH - 5), W: px(math.Max(x1-x0, 1)), H: "5",
				Class: "st-stalled", Title: fmt.Sprintf("%s stalled from %s to %s", name, msText(st[0]), msText(st[1]))})
		}
		for _, f := range mt.faults {
			if f.agent != i {
				continue
			}
			if f.to > f.from {
				x0, x1 := x(f.from), x(f.to)
				lane.Faults = append(lane.Faults, faultView{X: px(x0), Y: px(top - 3), W: px(x1 - x0), H: px(laneH + 6),
					TextX: px(x0 + 3), TextY: px(top - 5), Label: fmt.Sprintf("%s %s to %s", f.label, msText(f.from), msText(f.to))})
				continue
			}
			lane.Drops = append(lane.Drops, dropView{X: px(x(f.from)), Y1: px(top - 3), Y2: px(top + 5),
				Title: fmt.Sprintf("%s: %s at %s", name, f.label, msText(f.from))})
		}
		lane.BottomOfLanes = px(height)
		v.Lanes = append(v.Lanes, lane)
	}

	rows := 0
	for _, w := range mt.writes {
		cx, cy := x(w.at), laneTop(w.agent)+laneH/2
		pos[w.id] = [2]float64{cx, cy}
		mv := markView{ID: w.id, X: px(cx), Y: px(cy), Link: w.link}
		where := fmt.Sprintf("%s wrote %s with fence %d at %s", agentName(w.agent), resourceName(w.resource), w.fence, msText(w.at))
		switch w.kind {
		case history.MarkAdmitted:
			mv.Kind, mv.Class = "admitted", "mark-admitted"
			mv.Title = where + ": landed"
		case history.MarkRefused:
			mv.Kind, mv.Class = "refused", "mark-refused"
			mv.Title = where + fmt.Sprintf(": REFUSED by the gate, whose floor %s had raised to fence %d", agentOrNone(h, w.other), w.otherFence)
			const r = 5
			mv.X1, mv.Y1, mv.X2, mv.Y2 = px(cx-r), px(cy-r), px(cx+r), px(cy+r)
			mv.X3, mv.Y3, mv.X4, mv.Y4 = px(cx-r), px(cy+r), px(cx+r), px(cy-r)
		case history.MarkStale:
			mv.Kind, mv.Class = "stale", "mark-stale"
			mv.Title = where + fmt.Sprintf(": STALE, landed after %s's fence %d, with no error", agentOrNone(h, w.other), w.otherFence)
			mv.Points = fmt.Sprintf("%s,%s %s,%s %s,%s", px(cx), px(cy-7), px(cx-6), px(cy+5), px(cx+6), px(cy+5))
		}
		lane := &v.Lanes[w.agent]
		lane.Marks = append(lane.Marks, mv)
		if w.kind != history.MarkAdmitted {
			if rows < maxTableRows {
				row := refusalRow{ID: w.id + "-row", At: msText(w.at), Agent: agentName(w.agent),
					Resource: resourceName(w.resource), Fence: uint64(w.fence), Result: mv.Kind, Link: w.link}
				row.LinkText = fmt.Sprintf("%s fence %d", agentOrNone(h, w.other), w.otherFence)
				v.Rows = append(v.Rows, row)
			} else {
				v.MoreRows++
			}
			rows++
		}
	}
	for _, p := range mt.pushes {
		if !p.applied {
			continue
		}
		cx, cy := x(p.at), laneTop(p.agent)+3
		pos[p.id] = [2]float64{cx, cy}
		v.Lanes[p.agent].Pushes = append(v.Lanes[p.agent].Pushes, pushView{ID: p.id,
			Title:  fmt.Sprintf("push (Admit) of %s's fence %d reached %s's gate at %s", agentName(p.agent), p.fence, resourceName(p.resource), msText(p.at)),
			Points: fmt.Sprintf("%s,%s %s,%s %s,%s %s,%s", px(cx), px(cy-4), px(cx+4), px(cy), px(cx), px(cy+4), px(cx-4), px(cy))})
	}
	for _, w := range mt.writes {
		if w.link == "" {
			continue
		}
		from, to := pos[w.id], pos[w.link]
		v.Links = append(v.Links, linkView{X1: px(from[0]), Y1: px(from[1]), X2: px(to[0]), Y2: px(to[1]),
			Title: fmt.Sprintf("%s's fence %d at %s was refused because of this write", agentName(w.agent), w.fence, msText(w.at))})
	}
	for _, r := range mt.restarts {
		label := "restart: fence counter lost"
		if r.persist {
			label = "restart: counter persisted"
		}
		v.Restarts = append(v.Restarts, restartView{X: px(x(r.at)), Y1: px(axisH + 2), Y2: px(height), TextY: px(axisH + 12),
			Label: label + " at " + msText(r.at)})
	}
	return v
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

// tickStep picks a 1-2-5 step putting axis labels at least 90px apart.
func tickStep(dur time.Duration, plotW float64) time.Duration {
	minStep := time.Duration(float64(dur) * 90 / plotW)
	for step := time.Millisecond; ; step *= 10 {
		for _, k := range []time.Duration{1, 2, 5} {
			if step*k >= minStep {
				return step * k
			}
		}
	}
}

func tickLabel(t, step time.Duration) string {
	if step >= time.Second {
		return strconv.FormatFloat(t.Seconds(), 'f', -1, 64) + "s"
	}
	return msText(t)
}
