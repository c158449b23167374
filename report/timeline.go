package report

import (
	"fmt"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// Timeline keeps the whole history a page needs (it has the Event method
// of a history.Subscriber): every agent's states over the run, every write, and every
// fault. (A Snapshot's lanes keep only recent history.) The lanes say what
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
	mode     history.Mode
	agents   []agentTrack
	writes   []writeMark
	pushes   []pushMark
	faults   []fault
	restarts []restartMark
	// floorBy finds the element (a write or a push) that raised a
	// resource's gate floor (or, in naive mode, landed the highest fence)
	// to a fence: the target of a refusal's link.
	floorBy map[floorKey]string
	read    *history.Reader
	end     time.Duration
}

type floorKey struct {
	resource int
	fence    leasefence.Fence
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
	fence    leasefence.Fence
}

// note appends a segment when the state (or the lease) changed at at.
func (t *agentTrack) note(at time.Duration) {
	seg := laneSeg{from: at, state: t.State()}
	seg.resource, seg.fence = t.Lease()
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
	fence      leasefence.Fence
	kind       history.MarkKind
	other      int // the floor's holder (refused) or the newer writer (stale); -1 if none
	otherFence leasefence.Fence
	link       string // id of the write or push that raised the floor, if recorded
}

// pushMark is the coordinator's push (Admit) reaching a gate.
type pushMark struct {
	id       string
	at       time.Duration
	agent    int // the new holder the push announces
	resource int
	fence    leasefence.Fence
	applied  bool // false: it arrived below the floor and changed nothing
}

// fault is a period or instant of trouble on one agent's lane.
type fault struct {
	agent    int
	from, to time.Duration // to == from for an instant (a lost message)
	label    string
}

type restartMark struct {
	at      time.Duration
	persist bool
}

// Event folds the next event of the run in.
func (r *Timeline) Event(e history.Event) {
	m := r.modes[e.Mode]
	if m == nil {
		m = &modeTimeline{mode: e.Mode, agents: make([]agentTrack, len(r.header.Agents)),
			floorBy: make(map[floorKey]string), read: history.NewReader(&r.header)}
		for i := range m.agents {
			m.agents[i].AgentTrack = history.NewAgentTrack()
			m.agents[i].segs = []laneSeg{{from: 0, state: history.AgentIdle, resource: -1}}
		}
		r.modes[e.Mode] = m
	}
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
			fence: e.Fence, kind: history.MarkAdmitted, other: -1}
		if lw := m.read.LastWrite(); lw.Stale {
			w.kind, w.other, w.otherFence = history.MarkStale, int(lw.FloorAgent), lw.FloorFence
			w.link = m.floorBy[floorKey{e.Resource, lw.FloorFence}]
		} else {
			m.floorBy[floorKey{e.Resource, e.Fence}] = w.id
		}
		m.writes = append(m.writes, w)
	case history.CommitRefused:
		m.writes = append(m.writes, writeMark{id: fmt.Sprintf("%s-w%d", e.Mode, len(m.writes)+1), at: e.At, agent: e.Agent,
			resource: e.Resource, fence: e.Fence, kind: history.MarkRefused, other: e.Other, otherFence: e.OtherFence,
			link: m.floorBy[floorKey{e.Resource, e.OtherFence}]})
	case history.AdmitPushed:
		p := pushMark{id: fmt.Sprintf("%s-p%d", e.Mode, len(m.pushes)+1), at: e.At, agent: e.Agent, resource: e.Resource,
			fence: e.Fence, applied: e.Outcome != history.OutcomeBelowFloor}
		if p.applied {
			if _, written := m.floorBy[floorKey{e.Resource, e.Fence}]; !written {
				m.floorBy[floorKey{e.Resource, e.Fence}] = p.id
			}
		}
		m.pushes = append(m.pushes, p)
	case history.PartitionBegan:
		m.faults = append(m.faults, fault{agent: e.Agent, from: e.At, to: -1, label: "partitioned"})
	case history.PartitionEnded:
		for i := len(m.faults) - 1; i >= 0; i-- {
			if f := &m.faults[i]; f.agent == e.Agent && f.to < 0 {
				f.to = e.At
				break
			}
		}
	case history.RequestDropped:
		m.faults = append(m.faults, fault{agent: e.Agent, from: e.At, to: e.At, label: "request lost"})
	case history.ReplyDropped:
		m.faults = append(m.faults, fault{agent: e.Agent, from: e.At, to: e.At, label: "reply lost"})
	case history.PushDropped:
		m.faults = append(m.faults, fault{agent: e.Agent, from: e.At, to: e.At, label: fmt.Sprintf("push of fence %d lost", e.Fence)})
	}
	if e.Kind == history.CoordinatorRestarted {
		m.restarts = append(m.restarts, restartMark{at: e.At, persist: e.Outcome == history.OutcomeCounterPersisted})
	}
	if t != nil {
		t.note(e.At)
	}
}

// finish closes what is still open at the run's end (or where it stopped).
func (m *modeTimeline) finish(end time.Duration) {
	for i := range m.faults {
		if m.faults[i].to < 0 {
			m.faults[i].to = end
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
