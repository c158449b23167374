package realtime

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver behind the sqlite store

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
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
	// *leasefence.StaleFenceError, or matches leasefence.ErrTokenConflict,
	// and records nothing; any other error means the write's fate is
	// unknown (Landings will tell).
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
	cur   atomic.Pointer[leasefence.Coordinator]
}

// NewMemory returns the in-memory backend.
func NewMemory() *Memory { return &Memory{} }

// Name implements Backend.
func (*Memory) Name() string { return "memory" }

// Open implements Backend.
func (m *Memory) Open(_ context.Context, _ history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl, Prover: m.Prover})
	if err != nil {
		return nil, err
	}
	mc := &memCoord{clock: clock, ttl: ttl}
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
		c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: mc.clock, TTL: mc.ttl, StartFence: start, Prover: m.Prover})
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

// MemoryStore keeps each resource behind an in-memory leasefence.FenceGate,
// its record a list appended to under the gate's write.
type MemoryStore struct{}

// Name implements Store.
func (MemoryStore) Name() string { return "memory" }

// Resource implements Store.
func (MemoryStore) Resource(_ context.Context, _ history.Mode, name string, now func() time.Duration) (Resource, error) {
	return &memResource{gate: leasefence.NewFenceGate(name), now: now}, nil
}

// Close implements Store.
func (MemoryStore) Close() error { return nil }

type memResource struct {
	gate *leasefence.FenceGate
	now  func() time.Duration

	mu     sync.Mutex // guards record: the resource's own, not the runner's
	record []Landing
}

func (r *memResource) land(id uint64) {
	r.mu.Lock()
	r.record = append(r.record, Landing{ID: id, At: r.now()})
	r.mu.Unlock()
}

// Commit records the write inside the gate's Commit, where the gate holds
// its lock: the record's order is the gate's.
func (r *memResource) Commit(ctx context.Context, t leasefence.Token, id uint64) error {
	return r.gate.Commit(ctx, t, func(context.Context) error {
		r.land(id)
		return nil
	})
}

func (r *memResource) Write(_ context.Context, _ leasefence.Token, id uint64) error {
	r.land(id)
	return nil
}

func (r *memResource) Landings(context.Context) ([]Landing, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Landing(nil), r.record...), nil
}

func (r *memResource) Admit(_ context.Context, t leasefence.Token) error { return r.gate.Admit(t) }

func (r *memResource) Floor(context.Context) (leasefence.Token, error) { return r.gate.Floor(), nil }

// SQLiteStore keeps the resources of each mode in a SQLite file of its
// own: each behind a sqlgate.Gate, its writes rows of a writes table,
// inserted in the gate's transaction (fenced) or on their own (naive).
type SQLiteStore struct {
	dir    string
	mu     sync.Mutex
	dbs    map[history.Mode]*sql.DB
	closed bool
	// attached: the directory is another process's (AttachSQLite), and
	// stays when this store closes.
	attached bool
}

// NewSQLiteStore makes a SQLite store in a new temporary directory under
// parent ("" for the system's), removed by Close.
func NewSQLiteStore(parent string) (*SQLiteStore, error) {
	dir, err := os.MkdirTemp(parent, "leasefence-sqlite-")
	if err != nil {
		return nil, fmt.Errorf("realtime: sqlite store: %w", err)
	}
	return &SQLiteStore{dir: dir, dbs: make(map[history.Mode]*sql.DB)}, nil
}

// Name implements Store.
func (*SQLiteStore) Name() string { return "sqlite" }

// Dir is the directory that holds the database files.
func (s *SQLiteStore) Dir() string { return s.dir }

func (s *SQLiteStore) open(ctx context.Context, mode history.Mode) (*sql.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("realtime: sqlite store is closed")
	}
	if db, ok := s.dbs[mode]; ok {
		return db, nil
	}
	dsn := "file:" + filepath.Join(s.dir, string(mode)+".db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("realtime: sqlite store: %w", err)
	}
	// The writes table is each resource's record: a row per write, in
	// the database's own sequence (the rowid), stamped inside the write's
	// transaction.
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS writes (
		seq INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, holder TEXT NOT NULL,
		fence INTEGER NOT NULL, write_id INTEGER NOT NULL, at_ns INTEGER NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("realtime: sqlite store: %w", err)
	}
	s.dbs[mode] = db
	return db, nil
}

// Resource implements Store.
func (s *SQLiteStore) Resource(ctx context.Context, mode history.Mode, name string, now func() time.Duration) (Resource, error) {
	db, err := s.open(ctx, mode)
	if err != nil {
		return nil, err
	}
	g, err := sqlgate.New(ctx, db, name)
	if err != nil {
		return nil, err
	}
	return &sqlResource{db: db, gate: g, name: name, now: now}, nil
}

// Close implements Store: it closes the databases and removes their
// directory. It is safe to call more than once.
func (s *SQLiteStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, db := range s.dbs {
		errs = append(errs, db.Close())
	}
	if !s.attached {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

type sqlResource struct {
	db   *sql.DB
	gate *sqlgate.Gate
	name string
	now  func() time.Duration
}

const insertWrite = `INSERT INTO writes (resource, holder, fence, write_id, at_ns) VALUES (?, ?, ?, ?, ?)`

// Commit inserts the write's row in the gate's transaction: admitted, it
// is in the record; refused, it never was.
func (r *sqlResource) Commit(ctx context.Context, t leasefence.Token, id uint64) error {
	return r.gate.Commit(ctx, t, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, insertWrite, r.name, t.Holder, int64(t.Fence), int64(id), int64(r.now()))
		return err
	})
}

func (r *sqlResource) Write(ctx context.Context, t leasefence.Token, id uint64) error {
	_, err := r.db.ExecContext(ctx, insertWrite, r.name, t.Holder, int64(t.Fence), int64(id), int64(r.now()))
	return err
}

func (r *sqlResource) Landings(ctx context.Context) ([]Landing, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT write_id, at_ns FROM writes WHERE resource = ? ORDER BY seq`, r.name)
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

func (r *sqlResource) Admit(ctx context.Context, t leasefence.Token) error {
	return r.gate.Admit(ctx, t)
}

func (r *sqlResource) Floor(ctx context.Context) (leasefence.Token, error) { return r.gate.Floor(ctx) }
