package liveview

import (
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// Snapshot is a consistent copy of one mode's state of a run at one
// instant, for a dashboard to draw. It shares nothing with the run.
type Snapshot struct {
	Scenario string
	Seed     uint64
	Mode     history.Mode
	// Fenced: the mode's contender writes through the gates (the
	// header's Contender), which Gates then show; else Writes do.
	Fenced   bool
	Now      time.Duration // true (virtual) time
	Duration time.Duration // the scenario's end
	Done     bool
	Events   uint64
	Push     bool    // the gate push is on
	DropRate float64 // the current request drop probability

	Totals  Totals
	Holders []HolderView // one per resource, in resource order
	Gates   []GateView   // one per resource (fenced mode), in resource order
	// Writes is what naive mode has instead of gates: one per resource
	// (naive mode only), in resource order.
	Writes []WritesView
	// StaleWrites are the newest writes that landed stale (naive mode),
	// oldest first (at most MaxSnapshotRefusals).
	StaleWrites []StaleWriteView
	Agents      []AgentView   // one per agent, in agent order
	Refusals    []RefusalView // the newest refusals, oldest first (at most MaxSnapshotRefusals)
	Lanes       []Lane        // one per agent, over the last TimelineWindow of virtual time
	Window      time.Duration // the span the lanes cover, ending at Now
	// Faults are the faults played so far (partitions, restarts,
	// crashes, etcd member faults: every fault_began), oldest first, at
	// most MaxSnapshotFaults.
	Faults []FaultView
}

// FaultView is one fault as it was played: its kind, what it befell,
// from At until End.
type FaultView struct {
	Kind string // as spec.Faults spells it: "partition", "pause_leader"
	// Target is what it befell: an agent's name, "coordinator", "etcd
	// member 1 (the leader)".
	Target string
	At     time.Duration
	// End is when it ended, or is to end (At for an instant).
	End time.Duration
	// Detail says how it was played, where the kind has variants
	// ("traffic delayed 200ms").
	Detail string
	// NotPlayed says why it could not be played ("" if it was).
	NotPlayed string
}

// Active reports whether the fault is in force at now: it was played,
// lasts, and has begun but not ended.
func (f FaultView) Active(now time.Duration) bool {
	return f.NotPlayed == "" && f.At <= now && now < f.End
}

// MaxSnapshotFaults is how many faults a Snapshot carries.
const MaxSnapshotFaults = 200

// MaxSnapshotRefusals is how many refusals a Snapshot carries.
const MaxSnapshotRefusals = 200

// TimelineWindow is how much recent virtual time the lanes of a Snapshot cover.
const TimelineWindow = 10 * time.Second

// Totals are running counters of one run.
type Totals struct {
	Acquisitions    int
	Renewals        int
	Expiries        int
	CommitsAdmitted int
	CommitsRefused  int
	// WritesFailed counts the writes the store failed (fate unknown).
	WritesFailed int
	// StaleWritesLanded is counted live at the resource: a write that
	// landed after a write of a higher fence.
	StaleWritesLanded int
	MessagesLost      int
	// ForgeriesRefused and ForgeriesLanded count the writes of forgers
	// (proofs the coordinator never granted), apart from the refusals of
	// stale fences in CommitsRefused.
	ForgeriesRefused int
	ForgeriesLanded  int
}

// HolderView is a resource's lease as the coordinator and its holder see it.
type HolderView struct {
	Resource string
	Holder   string // "" when the coordinator has no live lease
	Fence    leasefence.Fence
	// CoordinatorLeft is the time until the coordinator expires the lease
	// (<= 0: expired).
	CoordinatorLeft time.Duration
	// BeliefLeft is the time until the holder's own deadline, in true time
	// (<= 0: it no longer believes).
	BeliefLeft time.Duration
	State      history.AgentState // the holder's state
}

// GateView is one resource's gate.
type GateView struct {
	Resource    string
	FloorFence  leasefence.Fence
	FloorHolder string
	Admitted    int
	Refused     int
	// NotLogged counts the refusals the gate could not log: they have no
	// place in its log.
	NotLogged int
}

// WritesView is what landed on one resource with no gate in between.
type WritesView struct {
	Resource string
	Landed   int // every write that landed
	Stale    int // of them, those that landed after a newer generation's
	// Newest and NewestFence are the writer of the newest generation's
	// last write: what a stale write landed over.
	Newest      string
	NewestFence leasefence.Fence
}

// StaleWriteView is one write that landed stale, at the true instant it
// landed, over the newer generation's write before it.
type StaleWriteView struct {
	At        time.Duration
	Resource  string
	Writer    string
	Fence     leasefence.Fence
	Over      string
	OverFence leasefence.Fence
}

// AgentView is one agent.
type AgentView struct {
	Name     string
	State    history.AgentState
	Resource string // the resource it holds or wants, or ""
	Fence    leasefence.Fence
	// BeliefLeft is the time until the agent's own deadline for the lease
	// it holds, in true time (<= 0, or no lease: it does not believe). A
	// believes-expired agent shows how far its belief outlives the
	// coordinator's.
	BeliefLeft time.Duration
}

// RefusalView is one refused write, at the true instant it was refused.
type RefusalView struct {
	At time.Duration
	leasefence.Rejection
}

// Lane is one agent's recent history: the states it went through, each
// from its start instant until the next segment's (the last until Now).
type Lane struct {
	Agent    string
	Segments []Segment
	// Marks are the writes in the window: admitted, refused, or landed
	// stale.
	Marks []Mark
}

// Segment is a run of one state in a Lane.
type Segment struct {
	From  time.Duration
	State history.AgentState
	// Resource is the index (ResourceName) of the resource the agent held
	// or wanted during the segment, or -1 while it was idle: a dashboard
	// folds lanes per resource with it. int32 keeps lanes compact.
	Resource int32
}

// Mark is one write in a Lane.
type Mark struct {
	At       time.Duration
	Kind     history.MarkKind
	Resource int32 // index (ResourceName) of the resource written
}

// Speed limits of a paced run, as a dashboard may set them: virtual
// seconds per wall second.
const (
	MinSpeed = 0.01
	MaxSpeed = 10_000
)
