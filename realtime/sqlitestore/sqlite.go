package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver behind the sqlite store

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

func init() {
	registry.SetOpener(registry.Stores, registry.SQLite, realtime.StoreOpener(func(s *realtime.Setup) (realtime.Store, error) {
		return NewSQLiteStore(s.Config.TempDir)
	}))
}

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
	dir, err := scratch.MkdirTemp(parent, "leasefence-sqlite-")
	if err != nil {
		return nil, fmt.Errorf("realtime: sqlite store: %w", err)
	}
	return &SQLiteStore{dir: dir, dbs: make(map[history.Mode]*sql.DB)}, nil
}

// Name implements realtime.Store.
func (*SQLiteStore) Name() string { return registry.SQLite }

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

// Resource implements realtime.Store.
func (s *SQLiteStore) Resource(ctx context.Context, mode history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
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

// Close implements realtime.Store: it closes the databases and removes their
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

func (r *sqlResource) Landings(ctx context.Context) ([]realtime.Landing, error) {
	return realtime.QueryLandings(ctx, r.db, `SELECT write_id, at_ns FROM writes WHERE resource = ? ORDER BY seq`, r.name)
}

func (r *sqlResource) Admit(ctx context.Context, t leasefence.Token) error {
	return r.gate.Admit(ctx, t)
}

func (r *sqlResource) Floor(ctx context.Context) (leasefence.Token, error) { return r.gate.Floor(ctx) }
