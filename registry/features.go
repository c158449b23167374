package registry

import (
	"fmt"
	"slices"

	"github.com/leasefence/lab/spec"
)

// Feature is something a scenario may ask for that not every backend,
// store or driver plays.
type Feature struct {
	Name string // "crashes"
	// What names it in a refusal, as a scenario file spells it.
	What string
	// Field is the scenario file's key that asks for it.
	Field string
	// Kind is the choice that decides whether it is played: a refusal
	// names the entries of this kind that play it.
	Kind *Kind
	// Err is the refusal's own error, matched by errors.Is (nil for none
	// beyond ErrCannotPlay).
	Err error
	// In reports whether a scenario asks for it.
	In func(sc spec.Scenario) bool
	// Fault is the fault kind it is, for a feature that is one ("" for
	// the others).
	Fault spec.Fault
}

// fault is the feature of fault kind f.
func fault(f spec.Fault, what string, kind *Kind, err error) *Feature {
	return &Feature{Name: string(f), What: what, Field: f.Field(), Kind: kind, Err: err, Fault: f,
		In: func(sc spec.Scenario) bool { return sc.Has(f) }}
}

// The features, in the order refusals are looked for.
var (
	OverTheWire = &Feature{Field: "forgers", Name: "over-the-wire", What: "forgers or a network.write_delay, which only a resource across a network plays",
		Kind: Stores, Err: spec.ErrOverTheWire, In: func(sc spec.Scenario) bool { return sc.OverTheWire() }}
	PartitionMember = fault(spec.FaultPartitionMember, "etcd member partitions (faults, do: partition_member)", Backends, spec.ErrNeedsEtcd)
	PauseMember     = fault(spec.FaultPauseMember, "etcd member pauses (faults, do: pause_member)", Backends, spec.ErrNeedsEtcd)
	PauseLeader     = fault(spec.FaultPauseLeader, "etcd leader pauses (faults, do: pause_leader)", Backends, spec.ErrNeedsEtcd)
	EtcdMembers     = &Feature{Field: "etcd.members", Name: "etcd-members", What: "an etcd cluster's size (etcd.members)",
		Kind: Backends, In: func(sc spec.Scenario) bool { return sc.Etcd.Members != 0 }}
	Crashes       = fault(spec.FaultCrash, "crashes of agents (crashes), which only agents run as processes suffer", Drivers, spec.ErrNeedsProcesses)
	Interventions = &Feature{Field: "interventions", Name: "interventions", What: "recorded interventions, which replay only in the simulator",
		Kind: Backends, In: func(sc spec.Scenario) bool { return len(sc.Interventions) > 0 }}
	Partitions = fault(spec.FaultPartition, "partitions", Drivers, nil)
	Restarts   = fault(spec.FaultRestart, "coordinator restarts", Drivers, nil)
	Drops      = fault(spec.FaultDrop, "dropped and duplicated messages", Drivers, nil)
	Push       = fault(spec.FaultPush, "the gate push", Drivers, nil)

	// CoordinatorDrift is a drift of the lab's coordinator's clock. A
	// library's lock keeps its own time on its own server, which the lab
	// cannot drift: the drift would only skew the lab's dating of the
	// lock's deadlines, and judge the lock on a clock that is not its own.
	// Mapping its deadlines without the drift instead would run the lock
	// undrifted beside contenders that are drifted, and call a fault it
	// never suffered "the same faults". So the library contenders refuse
	// it, as the etcd and Redis backends refuse it for the lab's own.
	CoordinatorDrift = &Feature{Field: "clocks.coordinator_drift_ppm", Name: "coordinator-drift",
		What: "the lab coordinator's clock drift, --coordinator-drift-ppm", Kind: Contenders,
		In: func(sc spec.Scenario) bool { return sc.Clocks.CoordinatorDriftPPM != 0 }}

	// LockDelay is the lab coordinator's lock-delay (lock_delay), which
	// every backend gives it (leasefence's, etcdlease's and redislease's
	// LockDelay). A library's lock has none of its own: run with one, it
	// would run without it and be reported as if with, so the library
	// contenders refuse it.
	LockDelay = &Feature{Field: "lock_delay", Name: "lock-delay", What: "the lab coordinator's lock-delay (lock_delay)",
		Kind: Contenders, In: func(sc spec.Scenario) bool { return sc.LockDelay > 0 }}

	PausePrimary     = fault(spec.FaultPausePrimary, "pauses of the Redis primary (faults, do: pause_primary)", Backends, spec.ErrNeedsSentinel)
	KillPrimary      = fault(spec.FaultKillPrimary, "kills of the Redis primary (faults, do: kill_primary)", Backends, spec.ErrNeedsSentinel)
	PartitionPrimary = fault(spec.FaultPartitionPrimary, "partitions of the Redis primary from its replicas (faults, do: partition_primary)", Backends, spec.ErrNeedsSentinel)
	// KillConnections: the run's PostgreSQL connections terminated, which
	// only the PostgreSQL backend plays.
	KillConnections = fault(spec.FaultKillConnections, "kills of the PostgreSQL connections (faults, do: kill_connections)", Backends, spec.ErrNeedsPostgres)
)

// Features lists every feature: one per fault kind of spec.Faults, and
// the others.
var Features = []*Feature{OverTheWire, PartitionMember, PauseMember, PauseLeader, EtcdMembers, Crashes, Interventions,
	Partitions, Restarts, Drops, Push, CoordinatorDrift, PausePrimary, KillPrimary, PartitionPrimary, KillConnections, LockDelay}

// MemberFaults are the features of the etcd member faults (spec.MemberFaults).
var MemberFaults = []*Feature{PartitionMember, PauseMember, PauseLeader}

// PrimaryFaults are the features of the Redis primary's faults
// (spec.RedisFaults).
var PrimaryFaults = []*Feature{PausePrimary, KillPrimary, PartitionPrimary}

// FaultFeature is the feature of fault kind f; it panics on a kind
// spec.Faults does not list or Features has no feature for, so that a new
// kind without its registry statement fails the first test.
func FaultFeature(f spec.Fault) *Feature {
	for _, ft := range Features {
		if ft.Fault == f && slices.Contains(spec.Faults, f) {
			return ft
		}
	}
	panic(fmt.Sprintf("registry: no feature for fault kind %q", f))
}

// playsFaults reports whether entries of kind k state the fault kinds
// they play (Entry.Plays): backends and drivers do; a store or a
// contender plays whatever faults its backend and driver play.
func (k *Kind) playsFaults() bool { return k == Backends || k == Drivers }

// Faults lists the fault kinds e plays, in the order of spec.Faults: a
// backend or driver those it states (Plays), any other entry every kind
// but those whose features it refuses (a library contender: the faults of
// the lab's own coordinator).
func (e *Entry) Faults() []spec.Fault {
	if !e.Kind.playsFaults() {
		return slices.DeleteFunc(slices.Clone(spec.Faults), func(f spec.Fault) bool {
			return slices.ContainsFunc(e.Refuses, func(r *Feature) bool { return r.Fault == f })
		})
	}
	var out []spec.Fault
	for _, f := range spec.Faults {
		if slices.Contains(e.Plays, f) {
			out = append(out, f)
		}
	}
	return out
}
