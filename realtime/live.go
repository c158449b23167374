package realtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/spec"
)

// ErrRealTime is returned by the controls a real-time run cannot offer: a
// speed other than 1x, single steps, toggling the gate push.
var ErrRealTime = errors.New("not in a real-time run")

// Live is a real-time run as a dashboard sees it: the methods of
// tui.Source (the simulator's harness.Live has the same), safe for
// concurrent use. Its snapshots are folded from the run's own events, as
// the history has them, by history.AgentTrack and history.Reader.
type Live struct {
	r     *Runner
	views map[history.Mode]*liveview.Fold

	mu      sync.Mutex
	res     *Result                // once Run returned
	applied []history.Intervention // as record put them in the history
}

// NewLive prepares a real-time run of sc for a dashboard, with opts as New
// takes them.
func NewLive(sc spec.Scenario, opts Options) (*Live, error) {
	l := &Live{views: make(map[history.Mode]*liveview.Fold)}
	opts.live = append(opts.live, history.SubscriberFunc(l.event))
	r, err := New(sc, opts)
	if err != nil {
		return nil, err
	}
	l.r = r
	for _, m := range r.h.Modes {
		l.views[m] = liveview.New(&r.h, m, sc.Network.DropRequests)
	}
	return l, nil
}

// Runner is the run.
func (l *Live) Runner() *Runner { return l.r }

func (l *Live) event(e history.Event) {
	if v := l.views[e.Mode]; v != nil {
		v.Add(&e)
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

// Header is the run's history header.
func (l *Live) Header() history.Header { return l.r.Header() }

// Modes are the modes run.
func (l *Live) Modes() []history.Mode { return append([]history.Mode(nil), l.r.h.Modes...) }

// Now is true time since the run began.
func (l *Live) Now() time.Duration { return l.r.Elapsed() }

// RealTime is true. A real-time run cannot pause: its lock servers keep
// their own time (a Redis key's TTL, an etcd lease, the in-memory
// service's deadlines), so stopping the lab's agents while those clocks
// run would expire every lease they hold, a fault nobody asked for,
// recorded as though the run had played it; and holding the agents from
// new work while the clock runs changes what the run records, filling
// their lanes with waits that are the dashboard's doing. So the run goes
// on untouched, and a dashboard freezes its picture instead.
func (l *Live) RealTime() bool { return true }

// Paused is false: a real-time run never pauses (see RealTime).
func (l *Live) Paused() bool { return false }

// SetPaused does nothing: a real-time run cannot pause (see RealTime).
func (l *Live) SetPaused(bool) {}

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
func (l *Live) Intervene(iv history.Intervention) error {
	r := l.r
	iv.At = r.Elapsed()
	switch iv.Kind {
	case history.SetDropRate:
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
	case history.StallAgent:
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
	case history.RestartCoordinator:
		if rc, ok := r.backend.(RestartChecker); ok {
			if err := rc.CheckRestart(iv.Persist); err != nil {
				return fmt.Errorf("%w: %w", ErrRealTime, err)
			}
		}
		if !iv.Persist && floorsLostWithBackend(r.store) {
			return fmt.Errorf("%w: %w", ErrRealTime, ErrFloorsLost)
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

// record puts an intervention in every mode's history, and in the list
// Interventions returns.
func (l *Live) record(iv history.Intervention) {
	l.mu.Lock()
	l.applied = append(l.applied, iv)
	l.mu.Unlock()
	for _, m := range l.r.h.Modes {
		ivc := iv
		l.r.emit(m, history.Event{Kind: history.Intervened, Agent: agentIndex(l.r.h.Agents, iv.Agent), Resource: -1, Other: -1, Intervention: &ivc})
	}
}

// Interventions are the interventions applied so far, in order, each at
// the true instant it was applied.
func (l *Live) Interventions() []history.Intervention {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.applied)
}

// Snapshot is mode m's state now, for a dashboard to draw.
func (l *Live) Snapshot(m history.Mode) (liveview.Snapshot, bool) {
	v, ok := l.views[m]
	if !ok {
		return liveview.Snapshot{}, false
	}
	now := l.r.Elapsed()
	snap := v.Snapshot(now)
	snap.Scenario, snap.Seed, snap.Duration = l.r.sc.Name, l.r.sc.Seed, l.r.sc.Duration
	snap.Done = l.r.Done()
	return snap, true
}
