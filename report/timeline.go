package report

import (
	"fmt"
	"time"

	"github.com/leasefence/lab/history"
)

// Timeline keeps the history a page needs (it has the Event method of a
// history.Subscriber): every agent's states, every write, and every fault,
// over a window of each mode: its first 100,000 events. What came
// after the window is counted, not kept, so a page of a run of any length
// is drawn in bounded memory. (A Snapshot's lanes keep only recent
// history.) The lanes say what
// the history says, read through a history.Reader: an agent waits from
// sending an acquire until it is granted or gives the acquire up, holds
// from the grant until it gives the lease up (or, if it never does, until
// its belief ends and its last write is done: the checker's acting
// interval), stalls between a stall's start and end, and believes an
// expired lease once the reader has the generation lapsed while it acts.
type Timeline struct {
	header history.Header
	modes  map[history.Mode]*modeTimeline
}

// NewTimeline returns a Timeline for a run with header h.
func NewTimeline(h history.Header) *Timeline {
	return &Timeline{header: h, modes: make(map[history.Mode]*modeTimeline)}
}

// modeTimeline is one mode's recorded history.
type modeTimeline struct {
	mode   history.Mode
	agents []agentTrack
	writes []writeMark
	pushes []pushMark
	faults []fault // on an agent's lane
	wide   []fault // of no agent: the coordinator's, an etcd member's
	// floorBy finds the element (a write or a push) that raised a
	// resource's gate floor (or, in naive mode, landed the highest fence)
	// to a fence: the target of a refusal's link.
	floorBy map[floorKey]string
	read    *history.Reader
	end     time.Duration
	// The window: how many events were drawn, and from the instant the
	// first one was not (-1 while every one is), what came after it.
	drawn  int
	window time.Duration
	after  pastWindow
}

// pageEvents is how many events of each mode a page draws: the window of
// a longer run is its first pageEvents events (a variable for the tests).
var pageEvents = 100_000

// pastWindow counts what a mode did after its window.
type pastWindow struct {
	events, writes, refused, pushes, faults int
}

type floorKey struct {
	resource int
	fence    uint64
}

// agentTrack is one agent's lane: its state, as history.AgentTrack reads
// it from the events, over the whole run, and its stalls.
type agentTrack struct {
	history.AgentTrack
	stallFrom time.Duration
	stalled   [][2]time.Duration // every stall, drawn under the lane
	segs      []laneSeg
}

// laneSeg is a run of one state in an agent's lane, with the lease it was
// about (none when idle or waiting for a first grant).
type laneSeg struct {
	from     time.Duration
	state    history.AgentState
	resource int
	fence    uint64
}

// note appends a segment when the state (or the lease) changed at at.
func (t *agentTrack) note(at time.Duration) {
	seg := laneSeg{from: at, state: t.State()}
	resource, fence := t.Lease()
	seg.resource, seg.fence = resource, uint64(fence)
	same := func(a, b laneSeg) bool { return a.state == b.state && a.resource == b.resource && a.fence == b.fence }
	if n := len(t.segs); n > 0 {
		last := &t.segs[n-1]
		if same(*last, seg) {
			return
		}
		if last.from == at { // two changes at one instant: the later one stands
			*last = seg
			if n > 1 && same(t.segs[n-2], seg) {
				t.segs = t.segs[:n-1]
			}
			return
		}
	}
	t.segs = append(t.segs, seg)
}

// settle ends the agent's belief at its deadline if now is past it and no
// write is in flight: the checker's acting interval, from the acquisition
// to the later of the deadline and the last write.
func (t *agentTrack) settle(now time.Duration) {
	if at, ok := t.Settle(now); ok {
		if n := len(t.segs); n > 0 {
			at = max(at, t.segs[n-1].from)
		}
		t.note(at)
	}
}

// writeMark is one write attempt.
type writeMark struct {
	id         string
	at         time.Duration
	agent      int
	resource   int
	fence      uint64
	kind       history.MarkKind
	other      int // the floor's holder (refused) or the newer writer (stale); -1 if none
	otherFence uint64
	link       string // id of the write or push that raised the floor, if recorded
}

// pushMark is the coordinator's push (Admit) reaching a gate.
type pushMark struct {
	id       string
	at       time.Duration
	agent    int // the new holder the push announces
	resource int
	fence    uint64
	applied  bool // false: it arrived below the floor and changed nothing
}

// fault is a period or instant of trouble: on one agent's lane, or (agent
// -1) of the whole run.
type fault struct {
	agent    int
	kind     string // the fault's kind, "" for a lost message
	target   string
	from, to time.Duration // to == from for an instant (a lost message, a restart); -1 while open
	label    string
}

// Event folds the next event of the run in.
func (r *Timeline) Event(e history.Event) {
	m := r.modes[e.Mode]
	if m == nil {
		m = &modeTimeline{mode: e.Mode, agents: make([]agentTrack, len(r.header.Agents)),
			floorBy: make(map[floorKey]string), read: history.NewReader(&r.header), window: -1}
		for i := range m.agents {
			m.agents[i].AgentTrack = history.NewAgentTrack()
			m.agents[i].segs = []laneSeg{{from: 0, state: history.AgentIdle, resource: -1}}
		}
		r.modes[e.Mode] = m
	}
	if m.drawn >= pageEvents {
		m.past(&e)
		return
	}
	m.drawn++
	m.read.Add(&e)
	m.end = max(m.end, e.At)
	var t *agentTrack
	if e.Agent >= 0 && e.Agent < len(m.agents) {
		t = &m.agents[e.Agent]
	}
	if t != nil {
		t.settle(e.At)
	}
	stalls := 0
	if t != nil {
		stalls = t.Stalls()
		t.Add(&e, m.read, e.Agent)
	}
	switch e.Kind {
	case history.Expired, history.Released, history.CoordinatorRestarted:
		// The reader has the generation lapsed: its holder, if it still
		// acts, believes in a lease the coordinator let go.
		for i := range m.agents {
			if a := &m.agents[i]; a.Lapse(m.read, i) {
				a.note(e.At)
			}
		}
	case history.StallBegan:
		if stalls == 0 {
			t.stallFrom = e.At
		}
	case history.StallEnded:
		if stalls > 0 && t.Stalls() == 0 {
			t.stalled = append(t.stalled, [2]time.Duration{t.stallFrom, e.At})
		}
	case history.CommitAdmitted, history.WriteLanded:
		w := writeMark{id: fmt.Sprintf("%s-w%d", e.Mode, len(m.writes)+1), at: e.At, agent: e.Agent, resource: e.Resource,
			fence: uint64(e.Fence), kind: history.MarkAdmitted, other: -1}
		if lw := m.read.LastWrite(); lw.Stale {
			w.kind, w.other, w.otherFence = history.MarkStale, int(lw.FloorAgent), uint64(lw.FloorFence)
			w.link = m.floorBy[floorKey{e.Resource, uint64(lw.FloorFence)}]
		} else {
			m.floorBy[floorKey{e.Resource, uint64(e.Fence)}] = w.id
		}
		m.writes = append(m.writes, w)
	case history.CommitRefused:
		m.writes = append(m.writes, writeMark{id: fmt.Sprintf("%s-w%d", e.Mode, len(m.writes)+1), at: e.At, agent: e.Agent,
			resource: e.Resource, fence: uint64(e.Fence), kind: history.MarkRefused, other: e.Other, otherFence: uint64(e.OtherFence),
			link: m.floorBy[floorKey{e.Resource, uint64(e.OtherFence)}]})
	case history.AdmitPushed:
		p := pushMark{id: fmt.Sprintf("%s-p%d", e.Mode, len(m.pushes)+1), at: e.At, agent: e.Agent, resource: e.Resource,
			fence: uint64(e.Fence), applied: e.Outcome != history.OutcomeBelowFloor}
		if p.applied {
			if _, written := m.floorBy[floorKey{e.Resource, uint64(e.Fence)}]; !written {
				m.floorBy[floorKey{e.Resource, uint64(e.Fence)}] = p.id
			}
		}
		m.pushes = append(m.pushes, p)
	case history.FaultBegan, history.FaultEnded:
		m.fault(&r.header, &e)
	case history.RequestDropped:
		m.faults = append(m.faults, fault{agent: e.Agent, from: e.At, to: e.At, label: "request lost"})
	case history.ReplyDropped:
		m.faults = append(m.faults, fault{agent: e.Agent, from: e.At, to: e.At, label: "reply lost"})
	case history.PushDropped:
		m.faults = append(m.faults, fault{agent: e.Agent, from: e.At, to: e.At, label: fmt.Sprintf("push of fence %d lost", e.Fence)})
	}
	if t != nil {
		t.note(e.At)
	}
}

// past counts e, an event after the window.
func (m *modeTimeline) past(e *history.Event) {
	if m.window < 0 {
		m.window = e.At
	}
	a := &m.after
	a.events++
	switch e.Kind {
	case history.CommitAdmitted, history.WriteLanded:
		a.writes++
	case history.CommitRefused:
		a.writes++
		a.refused++
	case history.AdmitPushed:
		a.pushes++
	case history.FaultBegan, history.RequestDropped, history.ReplyDropped, history.PushDropped:
		a.faults++
	}
}

// drawnUntil is the end of what the page draws of a mode that ran until
// end: the window's, if the mode outran it.
func (m *modeTimeline) drawnUntil(end time.Duration) time.Duration {
	if m.window >= 0 {
		return min(end, m.window)
	}
	return end
}

// fault keeps a fault's beginning, whatever its kind, on its agent's lane
// or the run's; its end closes the latest of its kind on its target.
func (m *modeTimeline) fault(h *history.Header, e *history.Event) {
	list := &m.faults
	if e.Agent < 0 {
		list = &m.wide
	}
	target := h.Target(e)
	if e.Kind == history.FaultEnded {
		for i := len(*list) - 1; i >= 0; i-- {
			if f := &(*list)[i]; f.kind == e.Fault && f.target == target && f.to < 0 {
				f.to = e.At
				return
			}
		}
		return
	}
	f := fault{agent: e.Agent, kind: e.Fault, target: target, from: e.At, to: -1, label: e.Fault}
	if e.Agent < 0 {
		f.label += " on " + target
	}
	switch {
	case e.Outcome == history.OutcomeNotPlayed:
		f.to, f.label = e.At, f.label+" (not played: "+e.Detail+")"
	case e.Detail != "":
		f.label += ": " + e.Detail
	}
	if e.Instant() {
		f.to = e.At
	}
	*list = append(*list, f)
}

// finish closes what is still open at the run's end (or where it stopped).
func (m *modeTimeline) finish(end time.Duration) {
	for _, list := range [][]fault{m.faults, m.wide} {
		for i := range list {
			if list[i].to < 0 {
				list[i].to = end
			}
		}
	}
	for i := range m.agents {
		t := &m.agents[i]
		if t.Stalls() > 0 {
			t.stalled = append(t.stalled, [2]time.Duration{t.stallFrom, end})
			t.EndStalls()
		}
		t.settle(end)
	}
}
