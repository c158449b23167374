package spec

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/leasefence/lab/history"
)

// Header is the history header of a run of sc in modes: the participants
// and the assumptions the checker judges the run under.
func (sc *Scenario) Header(modes []history.Mode) history.Header {
	h := history.Header{
		Format: history.FormatVersion, Scenario: sc.Name, Description: sc.Description, Seed: sc.Seed, Backend: history.Simulator,
		Modes: append([]history.Mode(nil), modes...), Duration: sc.Duration,
		Agents: make([]string, sc.Agents), Resources: make([]string, sc.Resources),
		TTL: sc.TTL, ClockSkew: sc.ClockSkew,
		Clocks: history.Clocks{
			DriftPPMMin: sc.Clocks.DriftPPM.Min, DriftPPMMax: sc.Clocks.DriftPPM.Max,
			CoordinatorDriftPPM: sc.Clocks.CoordinatorDriftPPM, WithinBudget: sc.DriftWithinBudget(),
		},
	}
	for _, ac := range sc.Clocks.Agent {
		h.Clocks.DriftPPMMin = math.Min(h.Clocks.DriftPPMMin, ac.DriftPPM)
		h.Clocks.DriftPPMMax = math.Max(h.Clocks.DriftPPMMax, ac.DriftPPM)
	}
	for i := range h.Agents {
		h.Agents[i] = AgentName(i)
	}
	for i := range h.Resources {
		h.Resources[i] = ResourceName(i)
	}
	for _, r := range sc.Restarts {
		h.Restarts = append(h.Restarts, history.Restart{At: r.At, Persist: r.Persist})
	}
	return h
}

// Sample draws from d with r: every runner's draw, so that runners that
// follow the same scenario with the same seed draw the same durations.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	if l := d.LogNormal; l.On() {
		x := float64(l.Median) * math.Exp(l.Sigma()*r.NormFloat64())
		if x >= float64(MaxDuration) {
			return MaxDuration
		}
		return time.Duration(x)
	}
	if d.TailP > 0 && r.Float64() < d.TailP {
		return uniform(r, d.TailMin, d.TailMax)
	}
	return uniform(r, d.Min, d.Max)
}

func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}
