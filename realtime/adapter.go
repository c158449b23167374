package realtime

import (
	"context"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// The seam between the runner and the adapters of the real systems. Each
// backend and store lives in a package of its own beside the runner
// (realtime/etcdbackend, realtime/redisbackend, realtime/sqlitestore,
// realtime/httpstore), which registers what opens it under its registry
// name (registry.SetOpener) from an init function, as database/sql
// drivers do; a program links the adapters it runs (realtime/adapters
// links them all). The runner never names an adapter's type: what a
// backend or store differs in, it states through the optional interfaces
// below, and the runner asks for those.

// BackendAdapter is what a backend's adapter registers under its registry
// name: what checks a configuration for it, and what opens it.
type BackendAdapter struct {
	// Check reports why c cannot run sc on the backend, beyond what its
	// registry entry refuses: the settings only this backend reads (its
	// cluster's size, its time's grain). It returns a *ConfigError; nil
	// Check checks nothing more.
	Check func(c Config, sc spec.Scenario) error
	// Open starts the backend (see BackendOpener).
	Open BackendOpener
}

// Describer is a Backend that says where its leases live, for a report,
// in more words than its name: "etcd (embedded, 3 members, min ttl 1s)".
type Describer interface {
	Describe() string
}

// CoarseRetryHinter is a Backend whose refusals' retry hints are coarse
// (etcd's are whole seconds) when CoarseRetryHints says so: agents that
// waited them out would miss every release and expiry in between, and
// poll in step, so the runner caps each hint at a quarter TTL, which
// keeps them as keen as the simulator's.
type CoarseRetryHinter interface {
	CoarseRetryHints() bool
}

// RestartChecker is a Backend that can say, before a restart is asked of
// it, why it cannot play one now (a cluster it did not start); nil if it
// can.
type RestartChecker interface {
	CheckRestart(persist bool) error
}

// LeaseKeeper is a Backend whose restart (persist) keeps every lease its
// coordinators granted, not only their fence counter: PostgreSQL recovers
// every row it committed from its write-ahead log, leases among them.
// When RestartKeepsLeases reports kept, the runner records such a restart
// as a restart fault on target, the server it restarted, and not as the
// coordinator's restart: the checker goes on holding each lease to its
// expiry across it, as the server does, where a coordinator_restarted
// would have it forget them and excuse a second grant of one.
type LeaseKeeper interface {
	RestartKeepsLeases() (target string, kept bool)
}

// FloorKeeper is a Store whose gates live in the backend's own server
// (etcd's gates in etcd): when FloorsLostWithBackend says so, a restart
// that loses the backend's state takes the gates' floors with it, and the
// runner refuses one (ErrFloorsLost).
type FloorKeeper interface {
	FloorsLostWithBackend() bool
}

// FaultPlayer is a Backend that plays kinds of a scenario's faults list
// (spec.TimedFault) on its own servers: etcd's members, the Redis
// primary. Its registry entry says which kinds (registry.Entry.Plays), so
// that a scenario asking for another is refused before anything starts;
// the runner schedules every entry alike (TimedFaults) and records it by
// its fault_began and fault_ended alone, from what these methods return.
type FaultPlayer interface {
	// BeginFault strikes f now, and returns once it is in force with
	// what ends it. An error says it could not begin and nothing of it
	// is in force: the run records it not played, and fails. A backend
	// that plays one fault at a time may wait here for the one before to
	// end, until ctx ends.
	BeginFault(ctx context.Context, f spec.TimedFault) (ActiveFault, error)
}

// ActiveFault is one fault of the faults list in force.
type ActiveFault interface {
	// Began names what the fault struck, as its fault_began's target
	// ("etcd member 1 (the leader)", "redis primary redis-0"), and how,
	// where its kind does not say it all (its detail: "traffic delayed
	// 50ms"; "" for nothing more).
	Began() (target, detail string)
	// End undoes the fault, within ctx's deadline, and says what it did.
	End(ctx context.Context) FaultOutcome
}

// FaultOutcome is what a fault of the faults list did, as its fault_ended
// says it.
type FaultOutcome struct {
	// Detail says what it did ("redis-2 promoted 2.231s after, redis-0
	// back as its replica"); "" for nothing more than its kind says.
	Detail string
	// Outcome is the fault_ended's outcome: history.OutcomeFailedOver
	// when the backend's store failed over to a replica during the fault
	// (the checker reads it: a fence minted since may reissue one the old
	// primary minted and no replica saw); "" for none.
	Outcome history.Outcome
	// Err: the fault did not do what the scenario asked of it (a fault of
	// the primary that saw no failover), which fails the run; Detail
	// says it too.
	Err error
}

// floorsLostWithBackend reports whether st's floors go with a restart
// that loses the backend's state.
func floorsLostWithBackend(st Store) bool {
	fk, ok := st.(FloorKeeper)
	return ok && fk.FloorsLostWithBackend()
}

// ForgingStore is a Store whose resources take a proof with each write
// (http): a writer with no lease can present one it made up, so a
// scenario's forgers (spec.Forgery) have something to attack. The runner
// asks the store for it when the scenario has forgers: the forgers' pace,
// their writes and the history's events are the runner's; the proofs, and
// what a refusal of one looks like, are the store's.
type ForgingStore interface {
	// Forge makes up the lease a forger presents for claim (the forger's
	// name as its holder, the resource, the highest fence there is), of
	// kind. genuine returns the newest lease the coordinator granted at
	// claim's resource or, with other, at any other resource: what a
	// forger that sniffed the wire tampers with or replays. ok is false
	// while there is nothing to work from yet (no genuine proof seen).
	Forge(kind spec.Forgery, claim leasefence.Token, genuine func(other bool) (leasefence.Lease, bool)) (l leasefence.Lease, ok bool, err error)
	// Refusal says how a resource turned a forged write away, as the
	// history records it ("409 Conflict"); ok is false when err is no
	// refusal (the write's fate is unknown).
	Refusal(err error) (why string, ok bool)
}

// ProvingStore is a Store whose resources verify the proof a write
// carries (http): the coordinator signs every grant with its Prover.
type ProvingStore interface {
	Prover() leasefence.Prover
}

// What a write to a resource across a network carries in its context:
// the writer's lease, whose proof the resource is shown, and the delay the
// write meets on the wire (the runner's fault layer). The store's
// transport sends the proof, and holds the request that long before
// sending it, after the writer's check passed, as a slow network would.

type (
	leaseKey     struct{}
	wireDelayKey struct{}
)

// WithLease is ctx carrying the lease a write is made under.
func WithLease(ctx context.Context, l leasefence.Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// WriteLease is the lease ctx carries, if any (see WithLease).
func WriteLease(ctx context.Context) (leasefence.Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(leasefence.Lease)
	return l, ok
}

// WithWireDelay is ctx carrying wire delay d (none for d <= 0).
func WithWireDelay(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, wireDelayKey{}, d)
}

// WireDelay is the wire delay ctx carries, if any.
func WireDelay(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(wireDelayKey{}).(time.Duration)
	return d, ok
}
