package liveview

import (
	"slices"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// Fold folds one mode's events into what a Snapshot shows: the one fold
// of a run's events for the dashboard, whichever runner emitted them. It
// reads the events only (through a history.Reader and history.AgentTrack),
// never a runner's state. Its methods are safe for concurrent use: a runner
// adds events from its goroutines while a dashboard takes snapshots.
type Fold struct {
	mu       sync.Mutex
	h        *history.Header
	mode     history.Mode
	read     *history.Reader
	agents   []agentFold
	gates    []GateView   // fenced mode only
	writes   []WritesView // naive mode only
	stale    []StaleWriteView
	refusals []RefusalView
	totals   Totals
	events   uint64
	dropRate float64
	faults   []FaultView // the faults played, oldest first
}

type agentFold struct {
	history.AgentTrack
	segs  []Segment
	marks []Mark
}

// Bounds of an agent's remembered lane.
const laneSegments, laneMarks = 64, 32

// New returns the fold of mode m's events of a run with header h, whose
// request drop rate starts at drop.
func New(h *history.Header, m history.Mode, drop float64) *Fold {
	v := &Fold{h: h, mode: m, read: history.NewReader(h), agents: make([]agentFold, len(h.Agents)), dropRate: drop}
	for i := range v.agents {
		v.agents[i].AgentTrack = history.NewAgentTrack()
		v.agents[i].segs = []Segment{{State: history.AgentIdle, Resource: -1}}
	}
	for _, name := range h.Resources {
		if h.Fenced(m) {
			v.gates = append(v.gates, GateView{Resource: name})
		} else {
			v.writes = append(v.writes, WritesView{Resource: name})
		}
	}
	return v
}

// Add folds one event, in history order.
func (v *Fold) Add(e *history.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events++
	v.read.Add(e)
	var a *agentFold
	if e.Agent >= 0 && e.Agent < len(v.agents) {
		a = &v.agents[e.Agent]
		if at, ok := a.Settle(e.At); ok {
			a.note(at)
		}
		a.Add(e, v.read, e.Agent)
	}
	switch e.Kind {
	case history.Acquired:
		v.totals.Acquisitions++
	case history.Renewed:
		v.totals.Renewals++
	case history.RequestDropped, history.ReplyDropped:
		v.totals.MessagesLost++
	case history.CommitAdmitted, history.WriteLanded:
		v.totals.CommitsAdmitted++
		kind := history.MarkAdmitted
		if v.read.LastWrite().Stale {
			v.totals.StaleWritesLanded++
			kind = history.MarkStale
		}
		a.mark(Mark{At: e.At, Kind: kind, Resource: int32(e.Resource)})
		if v.gates != nil {
			v.gates[e.Resource].Admitted++
		}
		if v.writes != nil {
			v.landed(e, kind == history.MarkStale)
		}
	case history.CommitRefused:
		v.totals.CommitsRefused++
		a.mark(Mark{At: e.At, Kind: history.MarkRefused, Resource: int32(e.Resource)})
		v.gates[e.Resource].Refused++
		if len(v.refusals) == 2*MaxSnapshotRefusals {
			v.refusals = append(v.refusals[:0], v.refusals[MaxSnapshotRefusals:]...)
		}
		// A gate logs every refused commit it can, and only those,
		// numbering them from 1: the refusal's place in its gate's log.
		// One it could not log has none (Seq 0).
		g := &v.gates[e.Resource]
		var seq uint64
		if e.Outcome.NotLogged() {
			g.NotLogged++
		} else {
			seq = uint64(g.Refused - g.NotLogged)
		}
		v.refusals = append(v.refusals, RefusalView{At: e.At, Rejection: leasefence.Rejection{
			Resource: v.h.Resources[e.Resource], Holder: v.h.Agents[e.Agent], Fence: e.Fence,
			FloorHolder: v.name(e.Other), FloorFence: e.OtherFence, Seq: seq}})
	case history.WriteFailed:
		v.totals.WritesFailed++
	case history.ForgeryRefused:
		v.totals.ForgeriesRefused++
	case history.ForgeryLanded:
		v.totals.ForgeriesLanded++
	case history.Expired, history.Released, history.CoordinatorRestarted:
		if e.Kind == history.Expired {
			v.totals.Expiries++
		}
		for i := range v.agents {
			if v.agents[i].Lapse(v.read, i) {
				v.agents[i].note(e.At)
			}
		}
	case history.Intervened:
		iv := e.Intervention
		switch {
		case iv == nil:
		case iv.Kind == history.SetDropRate:
			v.dropRate = iv.Value
		}
	case history.FaultBegan, history.FaultEnded:
		v.fault(e)
	}
	if a != nil {
		a.note(e.At)
	}
}

// fault keeps a fault's beginning, or ends the latest of its kind on its
// target that lasts.
func (v *Fold) fault(e *history.Event) {
	if e.Kind == history.FaultEnded {
		for i := len(v.faults) - 1; i >= 0; i-- {
			if f := &v.faults[i]; f.Kind == e.Fault && f.Target == v.h.Target(e) && f.End > f.At && f.NotPlayed == "" {
				f.End = min(f.End, e.At)
				return
			}
		}
		return
	}
	f := FaultView{Kind: e.Fault, Target: v.h.Target(e), At: e.At, End: e.At + e.Dur, Detail: e.Detail}
	if e.Outcome == history.OutcomeNotPlayed {
		f.NotPlayed, f.Detail, f.End = e.Detail, "", e.At
	}
	if len(v.faults) == 2*MaxSnapshotFaults {
		v.faults = append(v.faults[:0], v.faults[MaxSnapshotFaults:]...)
	}
	v.faults = append(v.faults, f)
}

// landed counts a naive write landing on its resource, and lists it if
// it landed stale, over the newest generation's writer.
func (v *Fold) landed(e *history.Event, stale bool) {
	w := &v.writes[e.Resource]
	w.Landed++
	if !stale {
		w.Newest, w.NewestFence = v.name(e.Agent), e.Fence
		return
	}
	w.Stale++
	if len(v.stale) == 2*MaxSnapshotRefusals {
		v.stale = append(v.stale[:0], v.stale[MaxSnapshotRefusals:]...)
	}
	v.stale = append(v.stale, StaleWriteView{At: e.At, Resource: w.Resource, Writer: v.name(e.Agent), Fence: e.Fence,
		Over: w.Newest, OverFence: w.NewestFence})
}

func (v *Fold) name(agent int) string {
	if agent < 0 || agent >= len(v.h.Agents) {
		return ""
	}
	return v.h.Agents[agent]
}

// note starts a segment when the agent's state or resource changed.
func (a *agentFold) note(at time.Duration) {
	seg := Segment{From: at, State: a.State(), Resource: int32(a.Wants())}
	if seg.State == history.AgentIdle {
		seg.Resource = -1
	}
	last := &a.segs[len(a.segs)-1]
	switch {
	case last.State == seg.State && last.Resource == seg.Resource:
	case last.From == at:
		*last = seg
	default:
		if len(a.segs) == laneSegments {
			a.segs = append(a.segs[:0], a.segs[1:]...)
		}
		a.segs = append(a.segs, seg)
	}
}

func (a *agentFold) mark(m Mark) {
	if a == nil {
		return
	}
	if len(a.marks) == laneMarks {
		a.marks = append(a.marks[:0], a.marks[1:]...)
	}
	a.marks = append(a.marks, m)
}

// Snapshot is the state at true instant now (the run's current instant):
// Scenario, Seed, Duration, Done and Push are the runner's to fill in.
func (v *Fold) Snapshot(now time.Duration) Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	// An agent whose own deadline has passed with no write in flight
	// believes no longer, though no event of its own says so yet.
	for i := range v.agents {
		if at, ok := v.agents[i].Settle(now); ok {
			v.agents[i].note(at)
		}
	}
	snap := Snapshot{Mode: v.mode, Fenced: v.h.Fenced(v.mode), Now: now, Events: v.events, DropRate: v.dropRate, Totals: v.totals,
		Window: TimelineWindow, Faults: slices.Clone(v.faults[max(0, len(v.faults)-MaxSnapshotFaults):])}
	for ri, name := range v.h.Resources {
		hv := HolderView{Resource: name}
		if gi := v.read.Latest(ri); gi >= 0 {
			if g := v.read.Generation(gi); !g.Lapsed() {
				hv.Holder, hv.Fence, hv.CoordinatorLeft = v.name(int(g.Agent)), g.Fence, g.CoordEnd-now
				a := &v.agents[g.Agent]
				hv.State = a.State()
				if res, f := a.Lease(); res == ri && f == g.Fence {
					end, _ := a.BeliefEnd()
					hv.BeliefLeft = end - now
				}
			}
		}
		snap.Holders = append(snap.Holders, hv)
	}
	for ri := range v.gates {
		g := v.gates[ri]
		f, by := v.read.Floor(ri)
		g.FloorFence, g.FloorHolder = f, v.name(int(by))
		snap.Gates = append(snap.Gates, g)
	}
	from := now - TimelineWindow
	for i := range v.agents {
		a := &v.agents[i]
		av := AgentView{Name: v.h.Agents[i], State: a.State()}
		if ri := a.Wants(); ri >= 0 {
			av.Resource = v.h.Resources[ri]
		}
		if _, f := a.Lease(); f != 0 {
			end, _ := a.BeliefEnd()
			av.Fence, av.BeliefLeft = f, end-now
		}
		snap.Agents = append(snap.Agents, av)
		lane := Lane{Agent: av.Name}
		for k, seg := range a.segs {
			if k+1 < len(a.segs) && a.segs[k+1].From <= from {
				continue
			}
			seg.From = max(seg.From, from)
			lane.Segments = append(lane.Segments, seg)
		}
		for _, m := range a.marks {
			if m.At >= from {
				lane.Marks = append(lane.Marks, m)
			}
		}
		snap.Lanes = append(snap.Lanes, lane)
	}
	tail := v.refusals[max(0, len(v.refusals)-MaxSnapshotRefusals):]
	snap.Refusals = append([]RefusalView(nil), tail...)
	if v.writes != nil {
		snap.Writes = append([]WritesView(nil), v.writes...)
		snap.StaleWrites = append([]StaleWriteView(nil), v.stale[max(0, len(v.stale)-MaxSnapshotRefusals):]...)
	}
	return snap
}
