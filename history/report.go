package history

import (
	"maps"
	"slices"
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
	r.Digest = combineDigests(ReportOrder(slices.Collect(maps.Keys(digests))), digests)
}

// Failed reports whether the run found a bug in a lock: the fenced mode
// broke a safety invariant it promises under the run's assumptions, a
// mode's lock broke mutual exclusion, or the library returned an error it
// never should in any mode.
func (r *Result) Failed() bool {
	for _, rep := range r.Modes {
		if len(rep.Violations) > 0 {
			return true
		}
	}
	return false
}

// Vacuous reports whether the run put nothing to the test: a fenced
// contender made no write at all, so its zeros say nothing (a run with no
// fenced contender: no mode made one).
func (r *Result) Vacuous() bool {
	fenced := false
	for _, rep := range r.Modes {
		if rep.Fenced() {
			fenced = true
			if rep.Vacuous {
				return true
			}
		}
	}
	if fenced {
		return false
	}
	for _, rep := range r.Modes {
		if !rep.Vacuous {
			return false
		}
	}
	return len(r.Modes) > 0
}

// Fenced reports whether the report's contender wrote through the gate:
// its Contender says so, or, for a report that describes none, its mode
// is the lab's fenced.
func (r *Report) Fenced() bool {
	if r.Contender.Discipline == "" {
		return r.Mode == Fenced
	}
	return r.Contender.Discipline == DisciplineFenced
}

// Violations lists every mode's violations, fenced first, then naive,
// then any other contender's by name.
func (r *Result) Violations() []string {
	var v []string
	modes := ReportOrder(slices.Collect(maps.Keys(r.Modes)))
	if i := slices.Index(modes, Fenced); i > 0 {
		modes = append(append([]Mode{Fenced}, modes[:i]...), modes[i+1:]...)
	}
	for _, m := range modes {
		if rep, ok := r.Modes[m]; ok {
			v = append(v, rep.Violations...)
		}
	}
	return v
}

// Report is what the checker found in one mode's history.
type Report struct {
	Mode Mode `json:"mode"`
	// Contender is what ran in the mode, as the history header says it.
	Contender Contender `json:"contender"`
	Digest    string    `json:"digest"`
	Events    uint64    `json:"events"`

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
	// IdleWhileWaitingMS is the availability the lock gave up, in
	// milliseconds of true time: how long its resources sat with no live
	// lease while an acquirer the coordinator had denied waited for one
	// (idleWaits says exactly). A lock-delay buys its protection with it;
	// without one it is 0 on the simulator.
	IdleWhileWaitingMS int `json:"idle_while_waiting_ms"`
	// FaultsPlayed counts the faults the run played (fault_began events,
	// whatever their kind; not those it could not play).
	FaultsPlayed int `json:"faults_played,omitempty"`
	// FaultsOnServers are the faults the run played, or could not, on a
	// server rather than an agent, in order (the first
	// MaxFaultsOnServers): what each fault_began and fault_ended said.
	FaultsOnServers []FaultOnServer `json:"faults_on_servers,omitempty"`

	// StaleWritesLanded counts writes that landed after a write of a newer
	// lease generation (minted later) on the same resource. Fenced mode
	// promises 0.
	StaleWritesLanded int `json:"stale_writes_landed"`
	// ReissuedWritesLanded counts writes of a resource's current
	// generation that landed under a fence no higher than one an older
	// generation had landed: the fence was reissued by a coordinator that
	// restarted without its counter. They are not stale.
	ReissuedWritesLanded int `json:"reissued_writes_landed"`
	// LapsedWritesLanded counts writes that landed after the end the
	// history has for their lease (Write.Lapsed), stale ones apart: the
	// writes a gate's floor admits until the newer holder's first write,
	// which only a gate that checks the lease refuses. Not a violation:
	// the fence's promise starts at the newer holder's write.
	LapsedWritesLanded int `json:"lapsed_writes_landed,omitempty"`
	// LeaseRefusals counts the refusals, among CommitsRefused, of a gate
	// that checks the lease too, for a lease not live.
	LeaseRefusals int `json:"lease_refusals,omitempty"`
	// Overlaps counts pairs of holders that acted as holders of the same
	// resource at the same true instant (from acquisition to the later of
	// their believed deadline and their last write in flight).
	Overlaps int `json:"overlaps"`
	// SilentOverlaps are overlaps in which the older holder's write landed
	// after the newer holder's, with no error anywhere.
	SilentOverlaps int `json:"silent_overlaps"`
	// MutualExclusionViolations counts grants the lock made while an
	// earlier lease on the same resource had neither been released nor
	// expired (MutualExclusion): the lock's own fault, whatever its
	// holders did and whatever their discipline. Any is a violation of
	// the mode (Violations): a fence makes such a grant harmless to the
	// resource, not the lock correct.
	MutualExclusionViolations int `json:"mutual_exclusion_violations"`
	// Takeovers counts the grants of a resource whose earlier lease had
	// not been released (it expired, a restart forgot it, or it still
	// ran): the grants that put mutual exclusion to the test.
	Takeovers int `json:"takeovers"`
	// NotExercised names each property of the mode the run never put to
	// the test (none: every one was), for which its zeros say nothing:
	// mutual exclusion with no takeover; for a fenced mode, the gate with
	// no overlap and no refusal, and containment with no expiry.
	NotExercised []string `json:"not_exercised,omitempty"`
	// RefusedOverlaps are overlaps in which the older holder's write was
	// refused.
	RefusedOverlaps int `json:"refused_overlaps"`
	// ContainmentBreaches counts leases whose holder believed them valid at
	// a true instant after the coordinator had expired them. Fenced mode
	// promises 0 while drift stays within the skew budget.
	ContainmentBreaches int `json:"containment_breaches"`
	// FenceReuses counts fences minted that were not above every fence
	// minted before them on their resource, and for the lab's coordinator
	// (one counter) on any resource, in the coordinator's order: in a
	// real-time history, where grants on different resources are recorded
	// as their replies return, only a fence recorded before the request
	// was sent counts across resources (for a library's lock, none: it
	// orders its fences per resource). Only a restart without persistence
	// causes it.
	FenceReuses int `json:"fence_reuses"`
	// UnexcusedFenceReuses counts the fence reuses with no restart that
	// lost the counter (a coordinator_restarted event saying so) between
	// the two mints: only a broken coordinator causes them.
	UnexcusedFenceReuses int `json:"unexcused_fence_reuses,omitempty"`
	// FailoverFenceReuses counts the fence reuses with no such restart
	// since a fault that failed the coordinator's store over to a replica
	// (a fault_ended with outcome failed_over) began: the store lost
	// fences it had acknowledged, which its options may prevent
	// (redislease's WAIT and Watermark).
	FailoverFenceReuses int `json:"failover_fence_reuses,omitempty"`
	// UnexplainedRefusals counts refusals whose floor the history does not
	// bear out: a floor not above the refused fence (nor equal to it under
	// another holder, a token conflict), or one no admitted commit and no
	// push had raised at that resource before. Always 0 unless the gate is
	// wrong.
	UnexplainedRefusals int `json:"unexplained_refusals"`
	// UnexplainedLandings counts writes that landed under no lease
	// generation the history granted their writer on that resource (a
	// resource it never held, a fence never minted). Always 0.
	UnexplainedLandings int `json:"unexplained_landings,omitempty"`
	// UnexplainedReleases counts releases the coordinator granted of a
	// lease it had already let go (expired or released), or of one never
	// granted. Always 0 unless the coordinator is wrong.
	UnexplainedReleases int `json:"unexplained_releases,omitempty"`
	// NotHeldUnmatched counts a contender lock's answers to Renew or
	// Release of a lease the record shows had ended that were errors not
	// matching ErrNotHeld: the lease contract says one that does
	// (ReasonNotHeldUnmatched records them). A violation.
	NotHeldUnmatched int `json:"not_held_unmatched,omitempty"`
	// RenewalsAfterEnd counts renewals the lock answered OK that were
	// sent after the record shows their lease had ended (expired,
	// released, taken over or forgotten): the lease contract says an
	// error matching ErrNotHeld. A violation of any mode.
	RenewalsAfterEnd int `json:"renewals_after_end,omitempty"`
	// RefusedWritesLanded counts writes the runner reported refused that
	// the resource's record has landed. Always 0 unless the gate is wrong.
	RefusedWritesLanded int `json:"refused_writes_landed,omitempty"`
	// AdmittedBelowPush counts commits the gate admitted under a fence
	// below one the coordinator's push had brought it before. Always 0
	// unless the gate is wrong.
	AdmittedBelowPush int `json:"admitted_below_push,omitempty"`
	// AdmittedBelowOwnFloor counts commits a gate admitted under a fence
	// below one it had admitted before (or equal to it, of another
	// writer), stale writes apart. A fence a coordinator reissued after
	// losing its counter is excused as a reuse, not as an admission: the
	// gate's floor is its own. Always 0 unless the gate is wrong (or its
	// own store lost its floor, which the record does not show).
	AdmittedBelowOwnFloor int `json:"admitted_below_own_floor,omitempty"`
	// Vacuous: the mode made no write at all, so its counters show nothing
	// exercised and its invariants were never put to the test.
	Vacuous bool `json:"vacuous,omitempty"`
	// ForgeriesRefused and ForgeriesLanded are the writes under proofs
	// forgers made up that the resource refused, and that landed (naive:
	// no gate to refuse them; fenced: a violation). ForgedFloorsMoved
	// counts the forged writes that landed above every fence before them.
	ForgeriesRefused  int `json:"forgeries_refused,omitempty"`
	ForgeriesLanded   int `json:"forgeries_landed,omitempty"`
	ForgedFloorsMoved int `json:"forged_floors_moved,omitempty"`

	PerResource []ResourceReport `json:"per_resource"`
	// Counterexamples are the first MaxCounterexamples of each kind, and
	// MoreCounterexamples how many more of each kind the history showed
	// (absent for none): a report stays the same size however long the
	// history.
	Counterexamples     []Counterexample           `json:"counterexamples"`
	MoreCounterexamples map[CounterexampleKind]int `json:"more_counterexamples,omitempty"`
	// Violations names each safety invariant the mode broke that it
	// promises under the run's assumptions (fenced mode only), the lock's
	// mutual-exclusion violations and each error the library returned
	// that it never should (any mode).
	Violations []string `json:"violations,omitempty"`
	// Findings are the verdict in three parts: the lock's own safety, the
	// write path and what the run exercised.
	Findings Findings `json:"findings"`
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
	StaleWrite         CounterexampleKind = "stale-write"          // a write landed after a newer generation's
	SilentOverlap      CounterexampleKind = "silent-overlap"       // both wrote, the older last, no error
	RefusedWrite       CounterexampleKind = "refused-write"        // the gate refused the older holder
	ContainmentBreach  CounterexampleKind = "containment-breach"   // believed valid after the coordinator expired it
	FenceReuse         CounterexampleKind = "fence-reuse"          // a fence minted twice or out of order
	UnexplainedRefusal CounterexampleKind = "unexplained-refusal"  // a refusal whose floor the history does not bear out
	UnexplainedLanding CounterexampleKind = "unexplained-landing"  // a landing under no lease the history granted
	UnexplainedRelease CounterexampleKind = "unexplained-release"  // a release of a lease no longer live
	RefusedWriteLanded CounterexampleKind = "refused-write-landed" // a write reported refused that landed
	AdmittedBelowPush  CounterexampleKind = "admitted-below-push"  // admitted under a fence below a pushed one
	AdmittedBelowFloor CounterexampleKind = "admitted-below-floor" // admitted under a fence below one the gate admitted
	// RenewedAfterEnd: the lock answered OK a renewal sent after the
	// lease had ended: the lease contract says it is an error matching
	// ErrNotHeld.
	RenewedAfterEnd CounterexampleKind = "renewed-after-end"
	// NotHeldAnswer: a contender lock answered Renew or Release of a
	// lease no longer live with an error that does not match ErrNotHeld.
	NotHeldAnswer CounterexampleKind = "not-held-unmatched"
	// MutualExclusionViolation: the lock granted a resource while an
	// earlier lease on it had neither been released nor expired.
	MutualExclusionViolation CounterexampleKind = "mutual-exclusion-violation"
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
	// UntilMS, for a mutual-exclusion violation, is until when the
	// earlier lease (Other's) still ran: the overlap the lock granted is
	// AtMS to UntilMS.
	UntilMS float64 `json:"until_ms,omitempty"`
	Detail  string  `json:"detail"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
