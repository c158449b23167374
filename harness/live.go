package harness

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// Speed limits of a paced run: virtual seconds per wall second (see
// liveview.MinSpeed).
const (
	MinSpeed = liveview.MinSpeed
	MaxSpeed = liveview.MaxSpeed
)

// Live runs one scenario in one or more modes, side by side on the same
// virtual clock, paced to wall time at a chosen speed, with pause, single
// steps and live interventions. Every method is safe for concurrent use: a
// dashboard reads Snapshots from its own goroutine while Run paces.
//
// Interventions go to every mode at the same virtual instant and are
// recorded, so Scenario returns a scenario that replays the steered run.
type Live struct {
	mu       sync.Mutex
	sims     []*Sim
	folds    []*liveview.Fold // one per sim: what the dashboard draws, folded from its events
	speed    float64
	paused   bool
	virtBase time.Duration // virtual time at wallBase
	wallBase time.Time
	now      func() time.Time
}

// NewLive builds a paced run of sc in modes (default both) at speed.
func NewLive(sc spec.Scenario, modes []history.Mode, speed float64, subs ...history.Subscriber) (*Live, error) {
	if err := checkSpeed(speed); err != nil {
		return nil, err
	}
	if len(modes) == 0 {
		modes = Modes
	}
	l := &Live{speed: speed, now: time.Now}
	for _, m := range modes {
		h := registry.Header(sc, []history.Mode{m})
		f := liveview.New(&h, m, sc.Network.DropRequests)
		fold := history.SubscriberFunc(func(e history.Event) { f.Add(&e) })
		s, err := NewSim(sc, m, append(append([]history.Subscriber(nil), subs...), fold)...)
		if err != nil {
			return nil, err
		}
		l.sims = append(l.sims, s)
		l.folds = append(l.folds, f)
	}
	l.wallBase = l.now()
	return l, nil
}

func checkSpeed(x float64) error {
	if math.IsNaN(x) || x < MinSpeed || x > MaxSpeed {
		return fmt.Errorf("%w: speed must be in [%v, %v], got %v", spec.ErrInvalidScenario, MinSpeed, MaxSpeed, x)
	}
	return nil
}

// Run paces the simulations to wall time until they are done or ctx ends,
// firing due events every tick.
func (l *Live) Run(ctx context.Context, tick time.Duration) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if l.catchUp() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// catchUp advances every simulation to the virtual instant wall time has
// reached, and reports whether all are done.
func (l *Live) catchUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.paused {
		target := l.virtBase + time.Duration(float64(l.now().Sub(l.wallBase))*l.speed)
		for _, s := range l.sims {
			s.RunUntil(target)
		}
	}
	return l.doneLocked()
}

func (l *Live) doneLocked() bool {
	for _, s := range l.sims {
		if !s.Done() {
			return false
		}
	}
	return true
}

// Done reports whether every simulation has reached its end.
func (l *Live) Done() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doneLocked()
}

// rebaseLocked restarts pacing from the current virtual instant.
func (l *Live) rebaseLocked() {
	l.virtBase = l.sims[0].Now()
	l.wallBase = l.now()
}

// RealTime is false: virtual time pauses, steps and changes pace.
func (l *Live) RealTime() bool { return false }

// SetPaused pauses or resumes virtual time.
func (l *Live) SetPaused(p bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p != l.paused {
		l.paused = p
		l.rebaseLocked()
	}
}

// Paused reports whether virtual time is paused.
func (l *Live) Paused() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paused
}

// SetSpeed changes the pace, in virtual seconds per wall second.
func (l *Live) SetSpeed(x float64) error {
	if err := checkSpeed(x); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rebaseLocked()
	l.speed = x
	return nil
}

// Speed returns the pace.
func (l *Live) Speed() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.speed
}

// Step fires the next event due in any mode, moving every mode to its
// instant; it is how a paused run is walked event by event. It returns
// false when there is nothing left.
func (l *Live) Step() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	next, any := time.Duration(math.MaxInt64), false
	for _, s := range l.sims {
		if t, ok := s.NextAt(); ok && t < next {
			next, any = t, true
		}
	}
	if !any {
		return false
	}
	for _, s := range l.sims {
		if t, ok := s.NextAt(); ok && t == next {
			s.Step()
			break
		}
	}
	for _, s := range l.sims {
		if !s.Done() {
			s.now = max(s.now, next) // nothing of theirs is due before next
		}
	}
	l.rebaseLocked()
	return true
}

// Advance moves every mode forward by d of virtual time, whatever the pace:
// for tests and scripted drivers.
func (l *Live) Advance(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	target := l.sims[0].Now() + d
	for _, s := range l.sims {
		s.RunUntil(target)
	}
	l.rebaseLocked()
}

// Intervene applies iv to every mode at the current virtual instant.
func (l *Live) Intervene(iv history.Intervention) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sims {
		if err := s.Intervene(iv); err != nil {
			return err
		}
	}
	return nil
}

// Modes returns the modes being run.
func (l *Live) Modes() []history.Mode {
	l.mu.Lock()
	defer l.mu.Unlock()
	modes := make([]history.Mode, len(l.sims))
	for i, s := range l.sims {
		modes[i] = s.Mode()
	}
	return modes
}

// Now returns the current virtual instant.
func (l *Live) Now() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sims[0].Now()
}

// Snapshot copies the state of the simulation of mode m, as the live view
// folds it from the simulation's events, and false if m is not being run.
func (l *Live) Snapshot(m history.Mode) (liveview.Snapshot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.sims {
		if s.Mode() == m {
			snap := l.folds[i].Snapshot(s.Now())
			snap.Scenario, snap.Seed, snap.Duration = s.sc.Name, s.sc.Seed, s.sc.Duration
			snap.Done, snap.Push = s.Done(), s.push
			return snap, true
		}
	}
	return liveview.Snapshot{}, false
}

// Result checks each mode's history so far.
func (l *Live) Result() *history.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc := l.sims[0].Scenario()
	modes := make([]history.Mode, len(l.sims))
	for i, s := range l.sims {
		modes[i] = s.Mode()
	}
	h := registry.Header(sc, modes)
	res := history.NewResult(&h)
	for _, s := range l.sims {
		res.Add(s.Report())
	}
	return res
}

// Header is the run's history header, every mode's.
func (l *Live) Header() history.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	modes := make([]history.Mode, len(l.sims))
	for i, s := range l.sims {
		modes[i] = s.Mode()
	}
	return registry.Header(l.sims[0].sc, modes)
}

// Scenario returns the scenario with every intervention made so far:
// running it replays this run.
func (l *Live) Scenario() spec.Scenario {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sims[0].Scenario()
}
