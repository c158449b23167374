package realtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// ErrRealTime is returned by the controls a real-time run cannot offer: a
// speed other than 1x, single steps, stalling a goroutine from outside,
// the gate push.
var ErrRealTime = errors.New("not in a real-time run")

// Live is a real-time run as a dashboard sees it: the methods of
// tui.Source (the simulator's harness.Live has the same), safe for
// concurrent use. Its snapshots are folded from the run's own events, as
// the history has them, by history.AgentTrack and history.Reader.
type Live struct {
	r     *Runner
	views map[history.Mode]*view

	mu  sync.Mutex
	res *Result // once Run returned
}

// NewLive prepares a real-time run of sc for a dashboard, with opts as New
// takes them.
func NewLive(sc spec.Scenario, opts Options) (*Live, error) {
	l := &Live{views: make(map[history.Mode]*view)}
	opts.Subscribers = append(append([]harness.Subscriber(nil), opts.Subscribers...), harness.SubscriberFunc(l.event))
	r, err := New(sc, opts)
	if err != nil {
		return nil, err
	}
	l.r = r
	for _, m := range r.h.Modes {
		l.views[m] = newView(&r.h, m, sc.Network.DropRequests)
	}
	return l, nil
}

// Runner is the run.
func (l *Live) Runner() *Runner { return l.r }

func (l *Live) event(e history.Event) {
	if v := l.views[e.Mode]; v != nil {
		v.add(&e)
	}
}

// Run runs the scenario (tick is unused: real time paces itself).
func (l *Live) Run(ctx context.Context, _ time.Duration) error {
	res, err := l.r.Run(ctx)
	l.mu.Lock()
	l.res = res
	l.mu.Unlock()
	return err
}

// Result is the checker's verdict on the run, once Run returned (nil
// before).
func (l *Live) Result() *Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res
}

// Scenario is the scenario run, as stretched onto the backend's time.
func (l *Live) Scenario() spec.Scenario { return l.r.sc }

// Modes are the modes run.
func (l *Live) Modes() []harness.Mode { return append([]harness.Mode(nil), l.r.h.Modes...) }

// Now is true time since the run began.
func (l *Live) Now() time.Duration { return l.r.Elapsed() }

// Paused reports whether agents are held from starting new work.
func (l *Live) Paused() bool { return l.r.Paused() }

// SetPaused holds agents from starting new work, or lets them go on.
func (l *Live) SetPaused(p bool) { l.r.SetPaused(p) }

// Speed is 1: real time.
func (l *Live) Speed() float64 { return 1 }

// SetSpeed refuses any speed but 1x.
func (l *Live) SetSpeed(x float64) error {
	if x == 1 {
		return nil
	}
	return fmt.Errorf("%w: time runs at 1x", ErrRealTime)
}

// Step does nothing and reports false: real time cannot be stepped.
func (l *Live) Step() bool { return false }

// Advance does nothing: real time cannot be advanced.
func (l *Live) Advance(time.Duration) {}

// Intervene applies a drop rate to every agent's fault layer, stalls an
// agent, or restarts the coordinators; it records the intervention in
// every mode's history.
// Other interventions are refused with ErrRealTime.
func (l *Live) Intervene(iv spec.Intervention) error {
	r := l.r
	iv.At = r.Elapsed()
	switch iv.Kind {
	case spec.SetDropRate:
		if !(iv.Value >= 0 && iv.Value <= 1) {
			return fmt.Errorf("%w: drop rate must be in [0, 1], got %v", spec.ErrInvalidScenario, iv.Value)
		}
		l.record(iv)
		for _, w := range r.worlds {
			for _, d := range w.agents {
				d.setDropRate(iv.Value)
			}
		}
		return nil
	case spec.StallAgent:
		ai := agentIndex(r.h.Agents, iv.Agent)
		if ai < 0 || iv.Duration <= 0 {
			return fmt.Errorf("%w: a stall needs an agent and a duration > 0", spec.ErrInvalidScenario)
		}
		r.mu.Lock()
		if r.runCtx == nil || r.runCtx.Err() != nil || r.stopped {
			r.mu.Unlock()
			return fmt.Errorf("%w: the run is not running", ErrRealTime)
		}
		r.extra.Add(1)
		r.mu.Unlock()
		l.record(iv)
		for _, w := range r.worlds {
			w.agents[ai].stall(iv.Duration)
		}
		r.extra.Done()
		return nil
	case spec.RestartCoordinator:
		if e, ok := r.backend.(*Etcd); ok {
			switch {
			case !e.Embedded():
				return fmt.Errorf("%w: only an embedded etcd can be restarted", ErrRealTime)
			case !iv.Persist && r.store.Name() == StoreEtcd:
				return fmt.Errorf("%w: a restart that loses etcd's state would take the etcd gates' floors with it", ErrRealTime)
			}
		}
		r.mu.Lock()
		ctx := r.runCtx
		if ctx == nil || ctx.Err() != nil || r.stopped {
			r.mu.Unlock()
			return fmt.Errorf("%w: the run is not running", ErrRealTime)
		}
		r.extra.Add(1) // the run waits for the restart it was asked for
		r.mu.Unlock()
		l.record(iv)
		go func() {
			defer r.extra.Done()
			r.restart(ctx, iv.Persist)
		}()
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRealTime, iv.Kind)
}

func (l *Live) record(iv spec.Intervention) {
	for _, m := range l.r.h.Modes {
		ivc := iv
		l.r.emit(m, history.Event{Kind: history.Intervened, Agent: agentIndex(l.r.h.Agents, iv.Agent), Resource: -1, Other: -1, Intervention: &ivc})
	}
}

// Snapshot is mode m's state now, for a dashboard to draw.
func (l *Live) Snapshot(m harness.Mode) (harness.Snapshot, bool) {
	v, ok := l.views[m]
	if !ok {
		return harness.Snapshot{}, false
	}
	now := l.r.Elapsed()
	snap := v.snapshot(now)
	snap.Scenario, snap.Seed, snap.Duration = l.r.sc.Name, l.r.sc.Seed, l.r.sc.Duration
	snap.Done = l.r.Done()
	return snap, true
}

// view folds one mode's events into what a Snapshot shows.
type view struct {
	mu       sync.Mutex
	h        *history.Header
	mode     history.Mode
	read     *history.Reader
	agents   []viewAgent
	gates    []harness.GateView // fenced mode only
	refusals []harness.RefusalView
	totals   harness.Totals
	events   uint64
	dropRate float64
}

type viewAgent struct {
	history.AgentTrack
	segs  []harness.Segment
	marks []harness.Mark
}

// Bounds of an agent's remembered lane, as the simulator keeps them.
const viewSegments, viewMarks = 64, 32

func newView(h *history.Header, m history.Mode, drop float64) *view {
	v := &view{h: h, mode: m, read: history.NewReader(h), agents: make([]viewAgent, len(h.Agents)), dropRate: drop}
	for i := range v.agents {
		v.agents[i].AgentTrack = history.NewAgentTrack()
		v.agents[i].segs = []harness.Segment{{State: harness.AgentIdle, Resource: -1}}
	}
	if m == history.Fenced {
		for _, name := range h.Resources {
			v.gates = append(v.gates, harness.GateView{Resource: name})
		}
	}
	return v
}

func (v *view) add(e *history.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events++
	v.read.Add(e)
	var a *viewAgent
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
		kind := harness.MarkAdmitted
		if v.read.LastWrite().Stale {
			v.totals.StaleWritesLanded++
			kind = harness.MarkStale
		}
		a.mark(harness.Mark{At: e.At, Kind: kind, Resource: int32(e.Resource)})
		if v.gates != nil {
			v.gates[e.Resource].Admitted++
		}
	case history.CommitRefused:
		v.totals.CommitsRefused++
		a.mark(harness.Mark{At: e.At, Kind: harness.MarkRefused, Resource: int32(e.Resource)})
		v.gates[e.Resource].Refused++
		if len(v.refusals) == 2*harness.MaxSnapshotRefusals {
			v.refusals = append(v.refusals[:0], v.refusals[harness.MaxSnapshotRefusals:]...)
		}
		v.refusals = append(v.refusals, harness.RefusalView{At: e.At, Rejection: leasefence.Rejection{
			Resource: v.h.Resources[e.Resource], Holder: v.h.Agents[e.Agent], Fence: e.Fence,
			FloorHolder: v.name(e.Other), FloorFence: e.OtherFence}})
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
		if iv := e.Intervention; iv != nil && iv.Kind == spec.SetDropRate {
			v.dropRate = iv.Value
		}
	}
	if a != nil {
		a.note(e.At)
	}
}

func (v *view) name(agent int) string {
	if agent < 0 || agent >= len(v.h.Agents) {
		return ""
	}
	return v.h.Agents[agent]
}

// note starts a segment when the agent's state or resource changed.
func (a *viewAgent) note(at time.Duration) {
	seg := harness.Segment{From: at, State: a.State(), Resource: int32(a.Wants())}
	if seg.State == harness.AgentIdle {
		seg.Resource = -1
	}
	last := &a.segs[len(a.segs)-1]
	switch {
	case last.State == seg.State && last.Resource == seg.Resource:
	case last.From == at:
		*last = seg
	default:
		if len(a.segs) == viewSegments {
			a.segs = append(a.segs[:0], a.segs[1:]...)
		}
		a.segs = append(a.segs, seg)
	}
}

func (a *viewAgent) mark(m harness.Mark) {
	if a == nil {
		return
	}
	if len(a.marks) == viewMarks {
		a.marks = append(a.marks[:0], a.marks[1:]...)
	}
	a.marks = append(a.marks, m)
}

func (v *view) snapshot(now time.Duration) harness.Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	snap := harness.Snapshot{Mode: v.mode, Now: now, Events: v.events, DropRate: v.dropRate, Totals: v.totals,
		Window: harness.TimelineWindow}
	for ri, name := range v.h.Resources {
		hv := harness.HolderView{Resource: name}
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
	from := now - harness.TimelineWindow
	for i := range v.agents {
		a := &v.agents[i]
		av := harness.AgentView{Name: v.h.Agents[i], State: a.State()}
		if ri := a.Wants(); ri >= 0 {
			av.Resource = v.h.Resources[ri]
		}
		if _, f := a.Lease(); f != 0 {
			end, _ := a.BeliefEnd()
			av.Fence, av.BeliefLeft = f, end-now
		}
		snap.Agents = append(snap.Agents, av)
		lane := harness.Lane{Agent: av.Name}
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
	tail := v.refusals[max(0, len(v.refusals)-harness.MaxSnapshotRefusals):]
	snap.Refusals = append([]harness.RefusalView(nil), tail...)
	return snap
}
