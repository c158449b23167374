package history

import (
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Result is the checker's verdict on a whole run: one Report per mode.
type Result struct {
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	// Digest is a hash of every mode's history: equal digests mean the
	// same run, event for event.
	Digest            string           `json:"digest"`
	VirtualDurationMS int64            `json:"virtual_duration_ms"`
	Events            uint64           `json:"events"`
	DriftWithinBudget bool             `json:"drift_within_budget"`
	Modes             map[Mode]*Report `json:"modes"`
}

// NewResult returns the empty Result of a run with header h.
func NewResult(h *Header) *Result {
	return &Result{
		Scenario:          h.Scenario,
		Seed:              h.Seed,
		VirtualDurationMS: h.Duration.Milliseconds(),
		DriftWithinBudget: h.Clocks.WithinBudget,
		Modes:             make(map[Mode]*Report, 2),
	}
}

// Add puts one mode's report in the result and folds its digest into the
// run's.
func (r *Result) Add(rep *Report) {
	r.Modes[rep.Mode] = rep
	r.Events += rep.Events
	digests := make(map[Mode]string, len(r.Modes))
	for m, x := range r.Modes {
		digests[m] = x.Digest
	}
	r.Digest = combineDigests([]Mode{Naive, Fenced}, digests)
}

// Failed reports whether the run found a bug in the library: the fenced
// mode broke a safety invariant it promises under the run's assumptions, or
// the library returned an error it never should in either mode.
func (r *Result) Failed() bool {
	for _, rep := range r.Modes {
		if len(rep.Violations) > 0 {
			return true
		}
	}
	return false
}

// Violations lists every mode's violations, fenced first.
func (r *Result) Violations() []string {
	var v []string
	for _, m := range []Mode{Fenced, Naive} {
		if rep, ok := r.Modes[m]; ok {
			v = append(v, rep.Violations...)
		}
	}
	return v
}

// Report is what the checker found in one mode's history.
type Report struct {
	Mode   Mode   `json:"mode"`
	Digest string `json:"digest"`
	Events uint64 `json:"events"`

	Acquisitions  int `json:"acquisitions"` // leases completed by agents
	Renewals      int `json:"renewals"`     // renewals completed by agents
	Denials       int `json:"denials"`
	Expiries      int `json:"expiries"` // leases that expired at the coordinator unrenewed
	Releases      int `json:"releases"`
	FencesMinted  int `json:"fences_minted"`
	Retries       int `json:"retries"`
	MessagesLost  int `json:"messages_lost"`
	ChecksFailed  int `json:"checks_failed"`
	PushesApplied int `json:"pushes_applied"`

	CommitsAdmitted int `json:"commits_admitted"` // writes that landed
	CommitsRefused  int `json:"commits_refused"`
	// WritesFailed counts writes the store failed (a timeout, a lost
	// connection): their writers could not know whether they landed, and
	// gave up their leases. Whether each landed is in the resource's own
	// record, and counted with the others.
	WritesFailed int `json:"writes_failed,omitempty"`

	// StaleWritesLanded counts writes that landed after a write of a newer
	// lease generation (minted later) on the same resource. Fenced mode
	// promises 0.
	StaleWritesLanded int `json:"stale_writes_landed"`
	// ReissuedWritesLanded counts writes of a resource's current
	// generation that landed under a fence no higher than one an older
	// generation had landed: the fence was reissued by a coordinator that
	// restarted without its counter. They are not stale.
	ReissuedWritesLanded int `json:"reissued_writes_landed"`
	// Overlaps counts pairs of holders that acted as holders of the same
	// resource at the same true instant (from acquisition to the later of
	// their believed deadline and their last write in flight).
	Overlaps int `json:"overlaps"`
	// SilentOverlaps are overlaps in which the older holder's write landed
	// after the newer holder's, with no error anywhere.
	SilentOverlaps int `json:"silent_overlaps"`
	// RefusedOverlaps are overlaps in which the older holder's write was
	// refused.
	RefusedOverlaps int `json:"refused_overlaps"`
	// ContainmentBreaches counts leases whose holder believed them valid at
	// a true instant after the coordinator had expired them. Fenced mode
	// promises 0 while drift stays within the skew budget.
	ContainmentBreaches int `json:"containment_breaches"`
	// FenceReuses counts fences minted that were not above every fence
	// minted before them: only a restart without persistence causes it.
	FenceReuses int `json:"fence_reuses"`
	// UnexplainedRefusals counts refusals that match no overlap and no
	// fence reuse. Always 0 unless the gate is wrong.
	UnexplainedRefusals int `json:"unexplained_refusals"`
	// ForgeriesRefused and ForgeriesLanded are the writes under proofs
	// forgers made up that the resource refused, and that landed (naive:
	// no gate to refuse them; fenced: a violation). ForgedFloorsMoved
	// counts the forged writes that landed above every fence before them.
	ForgeriesRefused  int `json:"forgeries_refused,omitempty"`
	ForgeriesLanded   int `json:"forgeries_landed,omitempty"`
	ForgedFloorsMoved int `json:"forged_floors_moved,omitempty"`

	PerResource     []ResourceReport `json:"per_resource"`
	Counterexamples []Counterexample `json:"counterexamples"`
	// Violations names each safety invariant the mode broke that it
	// promises under the run's assumptions (fenced mode only), and each
	// error the library returned that it never should (either mode).
	Violations []string `json:"violations,omitempty"`
}

// ResourceReport is the per-resource part of a Report.
type ResourceReport struct {
	Resource          string `json:"resource"`
	CommitsAdmitted   int    `json:"commits_admitted"`
	CommitsRefused    int    `json:"commits_refused"`
	StaleWritesLanded int    `json:"stale_writes_landed"`
	// ReissuedWritesLanded: as Report's.
	ReissuedWritesLanded int              `json:"reissued_writes_landed"`
	Overlaps             int              `json:"overlaps"`
	SilentOverlaps       int              `json:"silent_overlaps"`
	FloorFence           leasefence.Fence `json:"floor_fence"`
	FloorHolder          string           `json:"floor_holder,omitempty"`
}

// CounterexampleKind names what a counterexample shows.
type CounterexampleKind string

// The kinds of counterexample.
const (
	StaleWrite         CounterexampleKind = "stale-write"         // a write landed after a newer generation's
	SilentOverlap      CounterexampleKind = "silent-overlap"      // both wrote, the older last, no error
	RefusedWrite       CounterexampleKind = "refused-write"       // the gate refused the older holder
	ContainmentBreach  CounterexampleKind = "containment-breach"  // believed valid after the coordinator expired it
	FenceReuse         CounterexampleKind = "fence-reuse"         // a fence minted twice or out of order
	UnexplainedRefusal CounterexampleKind = "unexplained-refusal" // a refusal with no overlap behind it
)

// MaxCounterexamples is how many counterexamples of each kind a Report keeps.
const MaxCounterexamples = 5

// Counterexample is one concrete instance: who, which fences, and when
// (true time, in milliseconds since the run began).
type Counterexample struct {
	Kind       CounterexampleKind `json:"kind"`
	AtMS       float64            `json:"at_ms"`
	Resource   string             `json:"resource"`
	Holder     string             `json:"holder"`
	Fence      leasefence.Fence   `json:"fence"`
	Other      string             `json:"other,omitempty"`
	OtherFence leasefence.Fence   `json:"other_fence,omitempty"`
	Detail     string             `json:"detail"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
