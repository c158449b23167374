package history

import (
	"fmt"
	"time"
)

// FormatVersion is the version of the history file this package writes.
// Readers accept files of this version and ignore fields they do not know.
const FormatVersion = 1

// Header is what a checker needs to know about a run besides its events:
// who took part, and the assumptions the run promised to keep (TTL, skew
// budget, clock drift, coordinator restarts). It is the first line of a
// history file.
type Header struct {
	Format   int    `json:"format"`
	Scenario string `json:"scenario"`
	// Description says what the scenario shows, for reports.
	Description string `json:"description,omitempty"`
	Seed        uint64 `json:"seed"`
	// Backend names the runner that produced the history: "sim" for the
	// simulator.
	Backend string `json:"backend"`
	Modes   []Mode `json:"modes"`
	// Duration is the run's length in true time.
	Duration time.Duration `json:"duration_ns"`
	// Agents and Resources name the participants; events refer to them by
	// index here and by name in the file.
	Agents    []string `json:"agents"`
	Resources []string `json:"resources"`
	// TTL is the lease time-to-live every grant carries.
	TTL time.Duration `json:"ttl_ns"`
	// ClockSkew is every client's skew budget.
	ClockSkew time.Duration `json:"clock_skew_ns"`
	Clocks    Clocks        `json:"clocks"`
	// Restarts are the coordinator restarts the run planned. A live
	// restart shows as a CoordinatorRestarted event.
	Restarts []Restart `json:"restarts,omitempty"`
}

// Clocks are the run's clock assumptions.
type Clocks struct {
	// DriftPPMMin and DriftPPMMax bound the agents' clock drift.
	DriftPPMMin float64 `json:"drift_ppm_min"`
	DriftPPMMax float64 `json:"drift_ppm_max"`
	// CoordinatorDriftPPM is the coordinator's own drift.
	CoordinatorDriftPPM float64 `json:"coordinator_drift_ppm"`
	// WithinBudget says the skew budget covers the worst drift: then the
	// client promises that a holder's belief ends before the coordinator's
	// expiry, and a containment breach is a violation.
	WithinBudget bool `json:"within_budget"`
}

// Restart is a planned coordinator restart. Without Persist the new
// coordinator starts its fences from zero again, so fences are reused.
type Restart struct {
	At      time.Duration `json:"at_ns"`
	Persist bool          `json:"persist"`
}

// Validate reports the first problem that makes h unusable by a checker.
func (h *Header) Validate() error {
	switch {
	case h.Format != FormatVersion:
		return fmt.Errorf("%w: format %d, want %d", ErrBadHistory, h.Format, FormatVersion)
	case h.Scenario == "":
		return fmt.Errorf("%w: header has no scenario", ErrBadHistory)
	case len(h.Modes) == 0:
		return fmt.Errorf("%w: header has no modes", ErrBadHistory)
	case h.TTL <= 0:
		return fmt.Errorf("%w: header ttl_ns must be > 0, got %d", ErrBadHistory, h.TTL)
	case len(h.Resources) == 0:
		return fmt.Errorf("%w: header has no resources", ErrBadHistory)
	}
	seen := map[Mode]bool{}
	for _, m := range h.Modes {
		if m != Fenced && m != Naive {
			return fmt.Errorf("%w: header mode %q is neither fenced nor naive", ErrBadHistory, m)
		}
		if seen[m] {
			return fmt.Errorf("%w: header lists mode %q twice", ErrBadHistory, m)
		}
		seen[m] = true
	}
	if err := unique("agent", h.Agents); err != nil {
		return err
	}
	return unique("resource", h.Resources)
}

func unique(what string, names []string) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if n == "" {
			return fmt.Errorf("%w: header has an empty %s name", ErrBadHistory, what)
		}
		if seen[n] {
			return fmt.Errorf("%w: header names %s %q twice", ErrBadHistory, what, n)
		}
		seen[n] = true
	}
	return nil
}

// LostCounter reports whether the run planned a restart that loses the
// fence counter.
func (h *Header) LostCounter() bool {
	for _, r := range h.Restarts {
		if !r.Persist {
			return true
		}
	}
	return false
}
