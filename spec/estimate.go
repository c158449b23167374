package spec

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DefaultMaxEvents is the bound on a run's estimated events (each mode's)
// that a command refuses to go beyond unless told to: about 2.5 GB of
// history at the size an event takes in memory, hours of work for the
// checker, where every built-in scenario and fixture stays under a
// million.
const DefaultMaxEvents = 20_000_000

// EstimatedEvents is how many events one mode of a run of s makes, roughly
// and from above, before it runs: each unscripted agent (and forger) goes
// round its loop (think, acquire, check, stall and write each write, work
// between writes, release) for the whole run, with its events and its
// renewals; each scripted action makes a few. It is for refusing a run
// that could neither finish nor fit, not for predicting one.
func (s Scenario) EstimatedEvents() float64 {
	b := s.Agent
	w := max(b.WritesPerLease, 1)
	cycle := b.Think.Mean() + s.Network.RequestDelay.Mean() + s.Network.ReplyDelay.Mean() +
		time.Duration(w)*(b.Stall.Mean()+s.Network.WriteDelay.Mean()) + time.Duration(w-1)*b.WorkGap.Mean()
	cycle = max(cycle, minCycle)
	perCycle := 6.0 + 4*float64(w) // sent, granted, acquired, ... abandoned, released; a check, a stall's two ends and a write each write
	if b.RenewAt > 0 && s.TTL > 0 {
		perCycle += 3 * float64(cycle) / (b.RenewAt * float64(s.TTL)) // sent, extended, renewed
	}
	scripted := make(map[string]bool, len(s.Script))
	for _, a := range s.Script {
		scripted[a.Agent] = true
	}
	loops := float64(max(s.Agents-len(scripted), 0) + len(s.Forgers))
	return loops*float64(s.Duration)/float64(cycle)*perCycle + 4*float64(len(s.Script))
}

// minCycle is the shortest an agent's loop is taken to be: a loop of no
// time at all still takes the runner some.
const minCycle = 100 * time.Microsecond

// Mean is the distribution's mean.
func (d Dist) Mean() time.Duration {
	if l := d.LogNormal; l.On() {
		sigma := l.Sigma()
		return time.Duration(min(float64(l.Median)*math.Exp(sigma*sigma/2), float64(MaxDuration)))
	}
	body := float64(d.Min+d.Max) / 2
	tail := float64(d.TailMin+d.TailMax) / 2
	return time.Duration((1-d.TailP)*body + d.TailP*tail)
}

// CheckWork refuses a run of s whose estimated events (EstimatedEvents)
// exceed maxEvents; 0 sets no bound. The error gives the estimate.
func (s Scenario) CheckWork(maxEvents int64) error {
	est := s.EstimatedEvents()
	if maxEvents <= 0 || est <= float64(maxEvents) {
		return nil
	}
	return fmt.Errorf("%w: about %.3g events a mode (%d agents for %v), above the bound of %d", ErrTooMuchWork, est, s.Agents, s.Duration, maxEvents)
}

// ErrTooMuchWork refuses a run whose estimated work exceeds the bound it
// was given (CheckWork).
var ErrTooMuchWork = errors.New("the run's estimated work is too much to finish or fit")
