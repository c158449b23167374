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
	// are apart: the same name in two modes is two resources.
	Resource(ctx context.Context, mode history.Mode, name string) (Resource, error)
	Close() error
}

// Resource is one guarded resource.
type Resource interface {
	// Commit lands one write under t through the resource's gate, the
	// check and the write as one operation. A refusal is a
	// *leasefence.StaleFenceError, or matches leasefence.ErrTokenConflict;
	// any other error means the write's fate is unknown.
	Commit(ctx context.Context, t leasefence.Token) error
	// Write lands one write under t with no gate at all: naive mode.
	Write(ctx context.Context, t leasefence.Token) error
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
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
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
		c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: mc.clock, TTL: mc.ttl, StartFence: start})
		if err != nil {
			return err
		}
		mc.cur.Store(c)
	}
	return nil
}

// Close implements Backend.
func (*Memory) Close() error { return nil }

// MemoryStore keeps each resource behind an in-memory leasefence.FenceGate.
type MemoryStore struct{}

// Name implements Store.
func (MemoryStore) Name() string { return "memory" }

// Resource implements Store.
func (MemoryStore) Resource(_ context.Context, _ history.Mode, name string) (Resource, error) {
	return memResource{gate: leasefence.NewFenceGate(name)}, nil
}

// Close implements Store.
func (MemoryStore) Close() error { return nil }

type memResource struct{ gate *leasefence.FenceGate }

func (r memResource) Commit(ctx context.Context, t leasefence.Token) error {
	return r.gate.Commit(ctx, t, func(context.Context) error { return nil })
}

func (memResource) Write(context.Context, leasefence.Token) error { return nil }

func (r memResource) Admit(_ context.Context, t leasefence.Token) error { return r.gate.Admit(t) }

func (r memResource) Floor(context.Context) (leasefence.Token, error) { return r.gate.Floor(), nil }

// SQLiteStore keeps the resources of each mode in a SQLite file of its
// own: each behind a sqlgate.Gate, its writes rows of a writes table,
// inserted in the gate's transaction (fenced) or on their own (naive).
type SQLiteStore struct {
	dir    string
	mu     sync.Mutex
	dbs    map[history.Mode]*sql.DB
	closed bool
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
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS writes (
		resource TEXT NOT NULL, holder TEXT NOT NULL, fence INTEGER NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("realtime: sqlite store: %w", err)
	}
	s.dbs[mode] = db
	return db, nil
}

// Resource implements Store.
func (s *SQLiteStore) Resource(ctx context.Context, mode history.Mode, name string) (Resource, error) {
	db, err := s.open(ctx, mode)
	if err != nil {
		return nil, err
	}
	g, err := sqlgate.New(ctx, db, name)
	if err != nil {
		return nil, err
	}
	return &sqlResource{db: db, gate: g, name: name}, nil
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
	return errors.Join(append(errs, os.RemoveAll(s.dir))...)
}

type sqlResource struct {
	db   *sql.DB
	gate *sqlgate.Gate
	name string
}

const insertWrite = `INSERT INTO writes (resource, holder, fence) VALUES (?, ?, ?)`

func (r *sqlResource) Commit(ctx context.Context, t leasefence.Token) error {
	return r.gate.Commit(ctx, t, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, insertWrite, r.name, t.Holder, int64(t.Fence))
		return err
	})
}

func (r *sqlResource) Write(ctx context.Context, t leasefence.Token) error {
	_, err := r.db.ExecContext(ctx, insertWrite, r.name, t.Holder, int64(t.Fence))
	return err
}

func (r *sqlResource) Admit(ctx context.Context, t leasefence.Token) error {
	return r.gate.Admit(ctx, t)
}

func (r *sqlResource) Floor(ctx context.Context) (leasefence.Token, error) { return r.gate.Floor(ctx) }
