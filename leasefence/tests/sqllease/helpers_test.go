package sqllease_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// database is one empty database of a backend, from which any number of
// *sql.DB handles can be opened: two handles stand for two processes.
type database interface {
	dialect() sqllease.Dialect
	// handle opens a new *sql.DB on the database, closed when t ends.
	handle(t testing.TB) *sql.DB
}

// backends lists the databases the tests run on: SQLite always, PostgreSQL
// when LEASEFENCE_PG_URL is set.
var backends = []struct {
	name string
	open func(t testing.TB) database
}{
	{"SQLite", openSQLite},
	{"Postgres", openPostgres},
}

// forEachBackend runs test on a fresh database of each backend.
func forEachBackend(t *testing.T, test func(t *testing.T, db database)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t)) })
	}
}

// forEachBackendParallel is forEachBackend for a test that spends its time
// waiting out TTLs: it runs in parallel with the other parallel tests, and
// its backends' subtests with each other (each has a database of its own).
func forEachBackendParallel(t *testing.T, test func(t *testing.T, db database)) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.open(t))
		})
	}
}

// sqliteDB is one SQLite file, opened as a careful deployment opens it.
type sqliteDB struct{ *sqltest.SQLite }

func openSQLite(t testing.TB) database { return &sqliteDB{sqltest.NewSQLite(t, "leases.db")} }

func (*sqliteDB) dialect() sqllease.Dialect { return sqllease.SQLite }

func (d *sqliteDB) handle(t testing.TB) *sql.DB { return d.Open(t, sqltest.SQLiteParams) }

// postgresDB is a schema of its own on the server LEASEFENCE_PG_URL names.
type postgresDB struct{ *sqltest.Postgres }

func openPostgres(t testing.TB) database { return &postgresDB{sqltest.NewPostgres(t)} }

func (*postgresDB) dialect() sqllease.Dialect { return sqllease.Postgres }

func (d *postgresDB) handle(t testing.TB) *sql.DB { return d.Open(t, "", nil) }

// newCoordinator makes the schema on db, once per table, and a coordinator
// on it.
func newCoordinator(t testing.TB, db *sql.DB, opts sqllease.Options) *sqllease.Coordinator {
	t.Helper()
	if err := sqllease.CreateSchema(t.Context(), db, opts); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	c, err := sqllease.New(db, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// testTTL is long enough for a loaded machine's round trips, short enough
// for the suite's waits.
const testTTL = 300 * time.Millisecond
