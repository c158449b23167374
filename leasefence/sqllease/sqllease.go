package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/internal/sqldialect"
)

// DefaultTable is Options.Table when empty.
const DefaultTable = "leasefence_leases"

// DefaultReplayWindow is Options.ReplayWindow when 0.
const DefaultReplayWindow = 10 * time.Minute

// SchemaVersion is the version of the tables this package reads and
// writes; CreateSchema brings older tables up to it.
const SchemaVersion = 1

// Sentinel errors. Calls with a nil context, a nil *sql.DB or an option out
// of range answer leasefence.ErrInvalidRequest, before anything is sent.
var (
	// ErrSchema: the coordinator's tables are absent, or at another
	// version than SchemaVersion. CreateSchema creates them; nothing else
	// in this package does.
	ErrSchema = errors.New("sqllease: the coordinator's tables are missing or at another version")
	// ErrUnknownDialect: the driver's dialect could not be inferred; name it
	// with Options.Dialect.
	ErrUnknownDialect = errors.New("sqllease: unknown SQL dialect")
	// ErrBusy: the database stayed busy (SQLite), or aborted the
	// transaction to serialise it (PostgreSQL), on every attempt. Nothing
	// was decided; the call may be made again.
	ErrBusy = errors.New("sqllease: database busy, gave up retrying")
)

// Dialect is the SQL dialect of the database a Coordinator is on.
type Dialect int

// The dialects a Coordinator speaks.
const (
	SQLite   = Dialect(sqldialect.SQLite)
	Postgres = Dialect(sqldialect.Postgres)
)

func (d Dialect) String() string { return d.sql().String() }

func (d Dialect) sql() sqldialect.Dialect { return sqldialect.Dialect(d) }

// Options configures a Coordinator and CreateSchema.
type Options struct {
	// Table names the lease table, default DefaultTable; its companions
	// are Table+"_requests" and Table+"_meta". It may start with a schema
	// (PostgreSQL) or an attached database (SQLite) and a dot; otherwise
	// only letters, digits and underscores. Coordinators that share a
	// table share leases and one fence counter.
	Table string
	// TTL is the lease duration, > 0, whole microseconds: the database's
	// clock counts in microseconds. Only New needs it.
	TTL time.Duration
	// Dialect names the database's dialect; zero infers it from the
	// driver's package path ("sqlite"; "pgx", "lib/pq", "postgres"), and
	// any other driver is ErrUnknownDialect.
	Dialect Dialect
	// Clock stamps Grant.CoordinatorExpiresAt, which is for logs only;
	// default a monotonic clock of domain "sqllease". The lease itself is
	// timed by the database's clock.
	Clock leasefence.Clock
	// ReplayWindow is how long an acquire's request id is remembered for
	// retries; 0 means DefaultReplayWindow. A retry after the window is a
	// fresh acquisition, like a retry evicted from the in-memory
	// coordinator's replay cache.
	ReplayWindow time.Duration
	// LockDelay: after a lease expires (never after a release), the
	// resource is refused to everyone, its last holder included, until
	// LockDelay has passed since the expiry, with the reason "lock-delay"
	// and a RetryAfter covering the rest, as
	// leasefence.CoordinatorOptions.LockDelay. Whole microseconds; 0 (the
	// default) is no delay; at most leasefence.MaxLockDelay unless
	// AllowLongLockDelay. Only New needs it; see lockdelay.go for how the
	// table keeps it.
	LockDelay time.Duration
	// AllowLongLockDelay accepts a LockDelay above leasefence.MaxLockDelay.
	AllowLongLockDelay bool
}

// tablePattern is a table name that makes a plain identifier, optionally
// after a schema and a dot. Names are spliced into statements, so nothing
// else is let through.
var tablePattern = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$`)

// tables names a coordinator's three tables.
type tables struct{ leases, requests, meta string }

func newTables(name string) (tables, error) {
	if name == "" {
		name = DefaultTable
	}
	if !tablePattern.MatchString(name) {
		return tables{}, fmt.Errorf("%w: Options.Table %q: only letters, digits and underscores, optionally after a schema and a dot", leasefence.ErrInvalidRequest, name)
	}
	return tables{leases: name, requests: name + "_requests", meta: name + "_meta"}, nil
}

// dialectOf is d, or the dialect inferred from db's driver when d is zero.
func dialectOf(db *sql.DB, d Dialect) (Dialect, error) {
	if d != 0 {
		if !d.sql().Valid() {
			return 0, fmt.Errorf("%w: Options.Dialect %v is not SQLite or Postgres", leasefence.ErrInvalidRequest, d)
		}
		return d, nil
	}
	inferred, driver := sqldialect.Infer(db)
	if inferred == 0 {
		return 0, fmt.Errorf("%w: driver %s; name it with Options.Dialect", ErrUnknownDialect, driver)
	}
	return Dialect(inferred), nil
}

// Coordinator is a leasefence.Service whose state lives in a SQL database:
// the leases, the request ids and their answers, and the fence counter.
// It is safe for concurrent use, and any number of Coordinators, in any
// number of processes, may share one database and table: every decision
// is one transaction in the database.
type Coordinator struct {
	db      *sql.DB
	dialect Dialect
	tabs    tables
	ttl     time.Duration
	window  time.Duration
	delay   time.Duration // Options.LockDelay
	clock   leasefence.Clock
	q       statements
	checked atomic.Bool // the schema version was read and matched
}

var (
	_ leasefence.Service      = (*Coordinator)(nil)
	_ leasefence.HolderReader = (*Coordinator)(nil)
)

// New returns a coordinator on db. It sends nothing: the first call checks
// that CreateSchema has made the tables at SchemaVersion (ErrSchema
// otherwise), and nothing in a Coordinator creates or alters a table.
func New(db *sql.DB, opts Options) (*Coordinator, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqllease.New with a nil *sql.DB", leasefence.ErrInvalidRequest)
	}
	if err := wholeMicros("Options.TTL", opts.TTL); err != nil {
		return nil, err
	}
	window := opts.ReplayWindow
	if window == 0 {
		window = DefaultReplayWindow
	}
	if err := wholeMicros("Options.ReplayWindow", window); err != nil {
		return nil, err
	}
	if err := checkLockDelay(opts); err != nil {
		return nil, err
	}
	tabs, err := newTables(opts.Table)
	if err != nil {
		return nil, err
	}
	d, err := dialectOf(db, opts.Dialect)
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = leasefence.NewMonotonicClock("sqllease")
	}
	return &Coordinator{db: db, dialect: d, tabs: tabs, ttl: opts.TTL, window: window, delay: opts.LockDelay, clock: clock, q: newStatements(d, tabs)}, nil
}

func wholeMicros(name string, d time.Duration) error {
	if d < time.Microsecond || d%time.Microsecond != 0 {
		return fmt.Errorf("%w: %s must be whole microseconds >= 1µs, got %v", leasefence.ErrInvalidRequest, name, d)
	}
	return nil
}

// Dialect returns the dialect the coordinator speaks.
func (c *Coordinator) Dialect() Dialect { return c.dialect }

// ready checks, in this order, the call's context, invalid (the call's
// arguments, checked by the caller) and, once per coordinator, the schema.
func (c *Coordinator) ready(ctx context.Context, op string, invalid error) error {
	if ctx == nil {
		return fmt.Errorf("%w: sqllease %s with a nil context", leasefence.ErrInvalidRequest, op)
	}
	if invalid != nil {
		return fmt.Errorf("%s: %w", op, invalid)
	}
	if c.checked.Load() {
		return nil
	}
	var v int64
	if err := c.db.QueryRowContext(ctx, c.q.version).Scan(&v); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("sqllease: %s: %w (%w)", op, ctx.Err(), err)
		}
		return fmt.Errorf("%w: reading %s: %w; create the tables with sqllease.CreateSchema", ErrSchema, c.tabs.meta, err)
	}
	if v != SchemaVersion {
		return fmt.Errorf("%w: %s is at version %d, this package needs %d; run sqllease.CreateSchema", ErrSchema, c.tabs.meta, v, SchemaVersion)
	}
	c.checked.Store(true)
	return nil
}

// migrations[i] brings the tables from version i to version i+1. Each
// statement is idempotent, so a migration interrupted before its version
// was recorded can run again.
func migrations(d Dialect, tabs tables) [][]string {
	return [][]string{{
		`CREATE TABLE IF NOT EXISTS ` + tabs.leases + ` (
	resource   TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	fence      BIGINT NOT NULL,
	expires_us BIGINT NOT NULL,
	released   SMALLINT NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS ` + tabs.requests + ` (
	request_id TEXT PRIMARY KEY,
	resource   TEXT NOT NULL,
	holder     TEXT NOT NULL,
	fence      BIGINT NOT NULL,
	ttl_us     BIGINT NOT NULL,
	at_us      BIGINT NOT NULL
)`,
		createIndex(d, tabs.requests, "at", "(resource, at_us)"),
		`CREATE TABLE IF NOT EXISTS ` + tabs.meta + ` (
	version BIGINT NOT NULL,
	fence   BIGINT NOT NULL
)`,
		`INSERT INTO ` + tabs.meta + ` (version, fence) SELECT 0, 0 WHERE NOT EXISTS (SELECT 1 FROM ` + tabs.meta + `)`,
	}}
}

// createIndex creates the index table_suffix on table's columns, in the
// table's schema: PostgreSQL takes it from the table and refuses a
// qualified index name, SQLite takes it from the index's name and refuses
// a qualified table name.
func createIndex(d Dialect, table, suffix, columns string) string {
	schema, name, qualified := strings.Cut(table, ".")
	if !qualified {
		return `CREATE INDEX IF NOT EXISTS ` + table + `_` + suffix + ` ON ` + table + ` ` + columns
	}
	if d == Postgres {
		return `CREATE INDEX IF NOT EXISTS ` + name + `_` + suffix + ` ON ` + table + ` ` + columns
	}
	return `CREATE INDEX IF NOT EXISTS ` + schema + `.` + name + `_` + suffix + ` ON ` + name + ` ` + columns
}

// CreateSchema creates the coordinator's tables named by opts.Table, or
// migrates them to SchemaVersion, in one transaction; tables already at
// SchemaVersion are left alone, so it may run at every start. Only
// opts.Table and opts.Dialect are read. Tables at a version newer than
// this package's are ErrSchema, untouched. On PostgreSQL concurrent calls
// take turns (a transaction-scoped advisory lock on the table's name).
func CreateSchema(ctx context.Context, db *sql.DB, opts Options) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: sqllease.CreateSchema with a nil context", leasefence.ErrInvalidRequest)
	case db == nil:
		return fmt.Errorf("%w: sqllease.CreateSchema with a nil *sql.DB", leasefence.ErrInvalidRequest)
	}
	tabs, err := newTables(opts.Table)
	if err != nil {
		return err
	}
	d, err := dialectOf(db, opts.Dialect)
	if err != nil {
		return err
	}
	return retry(ctx, d, "creating the schema", func() error { return migrate(ctx, db, d, tabs) })
}

func migrate(ctx context.Context, db *sql.DB, d Dialect, tabs tables) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if d == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, tabs.leases); err != nil {
			return err
		}
	}
	steps := migrations(d, tabs)
	// The first statement writes, so that SQLite takes its write lock
	// before anything is read.
	for _, s := range steps[0] {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSchema, firstLine(s), err)
		}
	}
	var v int64
	if err := tx.QueryRowContext(ctx, `SELECT version FROM `+tabs.meta).Scan(&v); err != nil {
		return fmt.Errorf("%w: reading %s: %w", ErrSchema, tabs.meta, err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: %s is at version %d, newer than this package's %d", ErrSchema, tabs.meta, v, SchemaVersion)
	}
	for ; v < SchemaVersion; v++ {
		if v > 0 {
			for _, s := range steps[v] {
				if _, err := tx.ExecContext(ctx, s); err != nil {
					return fmt.Errorf("%w: migrating to version %d: %s: %w", ErrSchema, v+1, firstLine(s), err)
				}
			}
		}
	}
	if _, err := tx.ExecContext(ctx, d.sql().Placeholders(`UPDATE `+tabs.meta+` SET version = $1`), SchemaVersion); err != nil {
		return fmt.Errorf("%w: recording version %d: %w", ErrSchema, SchemaVersion, err)
	}
	return tx.Commit()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

const (
	attempts   = 8
	backoff    = 2 * time.Millisecond
	maxBackoff = 250 * time.Millisecond
)

// retry runs attempt until it succeeds, fails for good, or has failed
// transiently eight times, waiting a random, doubling while between
// attempts. A done ctx ends it with an error that matches ctx.Err().
func retry(ctx context.Context, d Dialect, op string, attempt func() error) error {
	var last error
	for i := range attempts {
		if i > 0 {
			timer := time.NewTimer(rand.N(min(backoff<<(i-1), maxBackoff)) + 1)
			select {
			case <-ctx.Done():
				timer.Stop()
				return fmt.Errorf("sqllease: %s: %w (after %w)", op, ctx.Err(), last)
			case <-timer.C:
			}
		}
		err := attempt()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			if errors.Is(err, cerr) {
				return fmt.Errorf("sqllease: %s: %w", op, err)
			}
			return fmt.Errorf("sqllease: %s: %w (%w)", op, cerr, err)
		}
		if !d.sql().Transient(err) {
			return fmt.Errorf("sqllease: %s: %w", op, err)
		}
		last = err
	}
	return fmt.Errorf("%w: %s, %d attempts; last: %w", ErrBusy, op, attempts, last)
}
