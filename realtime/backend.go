package realtime

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// Backend is where a run's leases come from: one coordinator per mode,
// reached as a leasefence.Service. Implementations are safe for concurrent
// use.
type Backend interface {
	// Name is the backend's name in reports and history headers.
	Name() string
	// Open makes the coordinator of one mode, granting leases of ttl;
	// clock reads true time since the run began, and stamps each grant's
	// CoordinatorExpiresAt where the backend lets it. The returned function
	// gives the service to call now: after a restart it is a new one.
	Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error)
	// Restart restarts every coordinator Open made. With persist the
	// coordinators keep their state (fence counter included); without it
	// they start over, and reissue fences.
	Restart(ctx context.Context, persist bool) error
	// Close releases everything the backend started. It is safe to call
	// more than once.
	Close() error
}

// LockDelayer is a Backend whose coordinators play a lock-delay
// (spec.Scenario.LockDelay): OpenLockDelay is Open with coordinators that,
// after a lease of a resource ends without a release, refuse the resource
// to everyone for delay (leasefence.ReasonLockDelay), and keep doing so
// after a restart. A delay the backend cannot time (etcd's are whole
// seconds) is an error matching ErrUnmappable. A backend that is not one
// (a library's lock) has no lock-delay, and OpenCoordinator refuses a
// scenario with one rather than run it without.
type LockDelayer interface {
	OpenLockDelay(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl, delay time.Duration) (func() leasefence.Service, error)
}

// ErrNoLockDelay: a scenario with a lock_delay on a coordinator that has
// none (not a LockDelayer).
var ErrNoLockDelay = errors.New("realtime: the coordinator has no lock-delay")

// OpenCoordinator opens b's coordinator of mode for sc, as every way of
// running agents does: granting leases of sc.TTL, and with sc.LockDelay
// playing it (LockDelayer), or refusing it (ErrNoLockDelay).
func OpenCoordinator(ctx context.Context, b Backend, mode history.Mode, clock leasefence.Clock, sc spec.Scenario) (func() leasefence.Service, error) {
	if sc.LockDelay == 0 {
		return b.Open(ctx, mode, clock, sc.TTL)
	}
	ld, ok := b.(LockDelayer)
	if !ok {
		return nil, fmt.Errorf("%w: lock_delay %v asks it of %s's, which would run without it", ErrNoLockDelay, sc.LockDelay, b.Name())
	}
	return ld.OpenLockDelay(ctx, mode, clock, sc.TTL, sc.LockDelay)
}

// Store is where a run's resources live: each has a gate for fenced
// writes and takes plain writes for naive ones.
type Store interface {
	Name() string
	// Resource opens the resource name of one mode. The modes' resources
	// are apart: the same name in two modes is two resources. now reads
	// the run's true time, for the resource to stamp its writes with.
	Resource(ctx context.Context, mode history.Mode, name string, now func() time.Duration) (Resource, error)
	Close() error
}

// Resource is one guarded resource. It keeps its own record of the writes
// that landed on it, made in the same operation as the write itself, and
// the run's history of landings is built from that record: the order in
// which the resource applied the writes is the resource's to say, never
// the runner's. Calls may come from many goroutines at once.
type Resource interface {
	// Commit lands write id under t through the resource's gate, the
	// check, the write and its record as one operation. A refusal is a
	// *leasefence.StaleFenceError, matches leasefence.ErrTokenConflict,
	// or, from a gate that checks the writer's lease too, is a
	// *LeaseRefusedError, and records nothing; any other error means the
	// write's fate is unknown (Landings will tell).
	Commit(ctx context.Context, t leasefence.Token, id uint64) error
	// Write lands write id under t with no gate at all (naive mode), and
	// records it.
	Write(ctx context.Context, t leasefence.Token, id uint64) error
	// Landings is the record of the writes that landed, in the order the
	// resource applied them, each stamped with the true instant the
	// resource took for it (as near the landing as the resource lets it:
	// inside its own critical section where it has one).
	Landings(ctx context.Context) ([]Landing, error)
	// Admit pushes t's fence to the gate (the coordinator's push).
	Admit(ctx context.Context, t leasefence.Token) error
	// Floor is the highest fence the gate admitted, with its holder.
	Floor(ctx context.Context) (leasefence.Token, error)
}

// LeaseRefusedError is a Resource's refusal of a write for its lease, not
// its fence: its gate checks that the writer's token is the resource's
// current, live lease (sqlgate.WithCurrentLease), and it was not.
type LeaseRefusedError struct {
	// Floor is the gate's floor, which admitted the token's fence.
	Floor leasefence.Token
	// NotLogged: the gate could not log the refusal.
	NotLogged bool
	Err       error // the gate's own
}

func (e *LeaseRefusedError) Error() string { return "lease not live: " + e.Err.Error() }

func (e *LeaseRefusedError) Unwrap() error { return e.Err }

// Memory is the backend of in-memory coordinators (leasefence.Local), one
// per mode: the real-time runner's own test bed, with no store in the way.
// A restart replaces each coordinator with a new one that resumes after
// the last fence it issued (persist) or from zero.
type Memory struct {
	// Prover, if set, gives every grant its proof (see
	// leasefence.CoordinatorOptions.Prover); set it before Open.
	Prover leasefence.Prover

	mu     sync.Mutex
	coords []*memCoord
}

type memCoord struct {
	clock leasefence.Clock
	ttl   time.Duration
	delay time.Duration // the lock-delay (OpenLockDelay), kept across restarts
	cur   atomic.Pointer[leasefence.Coordinator]
}

// options are mc's coordinator's, its fences from start on.
func (mc *memCoord) options(p leasefence.Prover, start leasefence.Fence) leasefence.CoordinatorOptions {
	return leasefence.CoordinatorOptions{Clock: mc.clock, TTL: mc.ttl, LockDelay: mc.delay, StartFence: start, Prover: p}
}

// NewMemory returns the in-memory backend.
func NewMemory() *Memory { return &Memory{} }

// Name implements Backend.
func (*Memory) Name() string { return registry.Memory }

// Open implements Backend.
func (m *Memory) Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	return m.OpenLockDelay(ctx, mode, clock, ttl, 0)
}

// OpenLockDelay implements LockDelayer: leasefence.CoordinatorOptions.LockDelay.
func (m *Memory) OpenLockDelay(_ context.Context, _ history.Mode, clock leasefence.Clock, ttl, delay time.Duration) (func() leasefence.Service, error) {
	mc := &memCoord{clock: clock, ttl: ttl, delay: delay}
	c, err := leasefence.NewCoordinator(mc.options(m.Prover, 0))
	if err != nil {
		return nil, err
	}
	mc.cur.Store(c)
	m.mu.Lock()
	m.coords = append(m.coords, mc)
	m.mu.Unlock()
	return func() leasefence.Service { return leasefence.Local(mc.cur.Load()) }, nil
}

// Restart implements Backend.
func (m *Memory) Restart(_ context.Context, persist bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mc := range m.coords {
		var start leasefence.Fence
		if persist {
			start = mc.cur.Load().IssuedFence()
		}
		c, err := leasefence.NewCoordinator(mc.options(m.Prover, start))
		if err != nil {
			return err
		}
		mc.cur.Store(c)
	}
	return nil
}

// Close implements Backend.
func (*Memory) Close() error { return nil }

// Landing is one write in a resource's record: its id, and the true
// instant the resource stamped it with.
type Landing struct {
	ID uint64
	At time.Duration
}

// QueryLandings is the record of a resource kept as rows of a SQL table:
// query selects each landing's write id and its stamp in nanoseconds, in
// the order the database applied them.
func QueryLandings(ctx context.Context, db *sql.DB, query string, args ...any) ([]Landing, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Landing
	for rows.Next() {
		var id, at int64
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out = append(out, Landing{ID: uint64(id), At: time.Duration(at)})
	}
	return out, rows.Err()
}

// MemoryStore keeps each resource behind an in-memory leasefence.FenceGate,
// its record a list appended to under the gate's write.
type MemoryStore struct{}

// Name implements Store.
func (MemoryStore) Name() string { return registry.Memory }

// Resource implements Store.
func (MemoryStore) Resource(_ context.Context, _ history.Mode, name string, now func() time.Duration) (Resource, error) {
	return NewMemoryResource(name, now), nil
}

// Close implements Store.
func (MemoryStore) Close() error { return nil }

// MemoryResource is a resource behind an in-memory leasefence.FenceGate,
// its record a list appended to under the gate's write: MemoryStore's,
// and the gate behind a store that puts a network in front of it.
//
// The gate raises its floor before the write it admits runs, and refuses
// a token below that floor at once, without waiting for the write: such
// a refusal, answered then, would be recorded before the landing that
// explains it. So a refusal, and a reading of the floor, are answered once
// the record accounts for the floor they name (settle).
type MemoryResource struct {
	gate *leasefence.FenceGate
	now  func() time.Duration

	mu     sync.Mutex // guards what follows: the resource's own, not the runner's
	record []Landing
	// floors are the tokens (holder and fence) the record accounts for as
	// the gate's floor: each admitted write's, and each push's. recorded
	// is signalled when one is added.
	floors   map[leasefence.Token]bool
	recorded sync.Cond
}

// NewMemoryResource is the resource name behind a gate of its own; now
// reads the run's true time, for the record's stamps.
func NewMemoryResource(name string, now func() time.Duration) *MemoryResource {
	r := &MemoryResource{gate: leasefence.NewFenceGate(name), now: now, floors: make(map[leasefence.Token]bool)}
	r.recorded.L = &r.mu
	return r
}

// land records write id; admitted, if not nil, is the token the gate
// admitted it under, its floor now.
func (r *MemoryResource) land(id uint64, admitted *leasefence.Token) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record = append(r.record, Landing{ID: id, At: r.now()})
	if admitted != nil {
		r.accountLocked(*admitted)
	}
}

// accountLocked notes that the record accounts for floor t; r.mu is held.
func (r *MemoryResource) accountLocked(t leasefence.Token) {
	r.floors[leasefence.Token{Holder: t.Holder, Fence: t.Fence}] = true
	r.recorded.Broadcast()
}

// settle waits until the record accounts for the floor holder@fence that
// the gate answered with. The wait is short, and needs no deadline: the
// floor was raised by a Commit whose write runs at once, with nothing to
// wait for before it records, or by an Admit about to return. The initial
// floor (fence 0) is nobody's.
func (r *MemoryResource) settle(holder string, fence leasefence.Fence) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for fence != 0 && !r.floors[leasefence.Token{Holder: holder, Fence: fence}] {
		r.recorded.Wait()
	}
}

// Commit records the write inside the gate's Commit, where the gate holds
// its lock: the record's order is the gate's. A refusal is answered once
// the record accounts for the floor that refused it.
func (r *MemoryResource) Commit(ctx context.Context, t leasefence.Token, id uint64) error {
	err := r.gate.Commit(ctx, t, func(context.Context) error {
		r.land(id, &t)
		return nil
	})
	var stale *leasefence.StaleFenceError
	var conflict *leasefence.TokenConflictError
	switch {
	case errors.As(err, &stale):
		r.settle(stale.FloorHolder, stale.FloorFence)
	case errors.As(err, &conflict):
		r.settle(conflict.FloorHolder, conflict.FloorFence)
	}
	return err
}

func (r *MemoryResource) Write(_ context.Context, _ leasefence.Token, id uint64) error {
	r.land(id, nil)
	return nil
}

func (r *MemoryResource) Landings(context.Context) ([]Landing, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Landing(nil), r.record...), nil
}

func (r *MemoryResource) Admit(_ context.Context, t leasefence.Token) error {
	err := r.gate.Admit(t)
	if err == nil {
		r.mu.Lock()
		r.accountLocked(t)
		r.mu.Unlock()
	}
	return err
}

// Floor is answered once the record accounts for the floor it returns.
func (r *MemoryResource) Floor(context.Context) (leasefence.Token, error) {
	f := r.gate.Floor()
	r.settle(f.Holder, f.Fence)
	return f, nil
}

func init() {
	registry.SetOpener(registry.Backends, registry.Memory, BackendAdapter{Open: func(_ context.Context, s *Setup, sc spec.Scenario) error {
		m := NewMemory()
		m.Prover = s.Prover()
		s.Backend, s.Scale = m, cmp.Or(s.Config.TimeScale, 1)
		s.Scenario = Scale(sc, s.Scale)
		return nil
	}})
	registry.SetOpener(registry.Stores, registry.Memory, StoreOpener(func(*Setup) (Store, error) { return MemoryStore{}, nil }))
}
