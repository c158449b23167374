package history

import (
	"errors"
	"fmt"
	"time"
)

// FormatVersion is the version of the history file this package writes.
// Readers accept files of this version and ignore fields they do not know.
// Version 2 records every fault as a fault_began/fault_ended pair, where
// version 1 had partition_began/partition_ended and etcd member faults
// as interventions; a version 1 file is refused with ErrOldFormat.
const FormatVersion = 2

// ErrOldFormat is matched (errors.Is) by the refusal of a history file of
// an older format than FormatVersion, beside ErrBadHistory.
var ErrOldFormat = errors.New("an older history format")

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
	// Backend names the runner that produced the history: Simulator for
	// the simulator (see Simulated).
	Backend string `json:"backend"`
	Modes   []Mode `json:"modes"`
	// Contenders describe the modes that are not the lab's own naive and
	// fenced (see Header.Contender); a header of those two alone carries
	// none, and reads as it always has.
	Contenders []Contender `json:"contenders,omitempty"`
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

// Simulator is the Backend of a history the deterministic simulator made.
const Simulator = "sim"

// Simulated reports whether backend, a header's Backend, is the
// simulator's: Simulator, or none named. Its times are virtual and exact;
// any other runner's are a machine's clocks.
func Simulated(backend string) bool { return backend == "" || backend == Simulator }

// Outline says who took part and under which lease terms, the facts every
// report puts under the scenario's name: "3 agents on 2 resources · ttl
// 1.000s", with the skew budget when there is one.
func (h *Header) Outline() string {
	s := Plural(len(h.Agents), "agent", "agents") + " on " + Plural(len(h.Resources), "resource", "resources") +
		" · ttl " + FormatDuration(h.TTL)
	if h.ClockSkew != 0 {
		s += " · skew budget " + FormatDuration(h.ClockSkew)
	}
	return s
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
	case h.Format == 1:
		return fmt.Errorf("%w: %w: format 1, written by a lab before the fault events (partition_began, partition_ended, "+
			"member faults as interventions); this lab reads format %d: run the scenario again to record it anew",
			ErrBadHistory, ErrOldFormat, FormatVersion)
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
	if err := h.validateContenders(); err != nil {
		return err
	}
	seen := map[Mode]bool{}
	for _, m := range h.Modes {
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

// CoordinatorTTL is the least true time the coordinator's clock takes to
// count the TTL: the TTL itself, or less on a coordinator's clock that
// runs fast (Clocks.CoordinatorDriftPPM above 0).
func (h *Header) CoordinatorTTL() time.Duration {
	if ppm := h.Clocks.CoordinatorDriftPPM; ppm > 0 {
		return time.Duration(float64(h.TTL) / (1 + ppm/1e6))
	}
	return h.TTL
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

// CheckEvent reports why e cannot be part of a history with header h: it
// names no agent or no resource where its kind names one, or one the header
// does not list. The encoder, the decoder and the Reader all ask it, so a
// history that one of them takes the others take too.
func (h *Header) CheckEvent(e *Event) error {
	if e.Kind == 0 || e.Kind >= numKinds {
		return fmt.Errorf("%w: event %d has no kind", ErrBadHistory, e.Seq)
	}
	if uint(e.Agent) < uint(len(h.Agents)) && uint(e.Resource) < uint(len(h.Resources)) && e.Other < len(h.Agents) {
		return nil // names both, and ones the header lists: the common case, every event on a runner's hot path
	}
	if err := party(e.Kind, "agent", e.Agent, len(h.Agents), e.Kind.NamesAgent()); err != nil {
		return err
	}
	if e.Kind.IsFault() && (e.Fault == "" || e.Agent < 0 && e.Target == "") {
		return fmt.Errorf("%w: %s event names no fault kind, or neither an agent nor a target", ErrBadHistory, e.Kind)
	}
	if err := party(e.Kind, "resource", e.Resource, len(h.Resources), e.Kind.NamesResource()); err != nil {
		return err
	}
	return party(e.Kind, "agent", e.Other, len(h.Agents), false)
}

func party(k Kind, what string, i, listed int, needed bool) error {
	switch {
	case i >= listed:
		return fmt.Errorf("%w: %s event names %s %d, which is not in the header (%d listed)", ErrBadHistory, k, what, i, listed)
	case i < 0 && needed:
		return fmt.Errorf("%w: %s event names no %s", ErrBadHistory, k, what)
	}
	return nil
}

// Target names what fault event e befalls: its agent's name, else its
// Target ("coordinator", "etcd member 2").
func (h *Header) Target(e *Event) string {
	if e.Agent >= 0 && e.Agent < len(h.Agents) {
		return h.Agents[e.Agent]
	}
	return e.Target
}
