package sqllease_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/leasefence/lab/leasefence/sqllease"
)

// pgURLEnv names the PostgreSQL server the tests use when it is set.
const pgURLEnv = "LEASEFENCE_PG_URL"

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

// sqliteDB is one SQLite file in WAL mode with a busy timeout, as a
// careful deployment opens it.
type sqliteDB struct{ path string }

func openSQLite(t testing.TB) database {
	return &sqliteDB{path: filepath.Join(t.TempDir(), "leases.db")}
}

func (*sqliteDB) dialect() sqllease.Dialect { return sqllease.SQLite }

func (d *sqliteDB) handle(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+d.path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// postgresDB is a schema of its own on the server LEASEFENCE_PG_URL names,
// dropped when the test ends; every handle has it as its search_path.
type postgresDB struct{ config *pgx.ConnConfig }

func pgConfig(t testing.TB) *pgx.ConnConfig {
	t.Helper()
	url := os.Getenv(pgURLEnv)
	if url == "" {
		t.Skipf("%s is not set: PostgreSQL tests skipped (start a throwaway server with scripts/postgres.sh start, then eval \"$(scripts/postgres.sh env)\")", pgURLEnv)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatalf("%s: %v", pgURLEnv, err)
	}
	return cfg
}

func openPostgres(t testing.TB) database {
	cfg := pgConfig(t)
	admin := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { admin.Close() })
	schema := "lf_test_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("creating schema %s on %s: %v", schema, os.Getenv(pgURLEnv), err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	cfg.RuntimeParams["search_path"] = schema
	return &postgresDB{config: cfg}
}

func (*postgresDB) dialect() sqllease.Dialect { return sqllease.Postgres }

func (d *postgresDB) handle(t testing.TB) *sql.DB {
	t.Helper()
	db := stdlib.OpenDB(*d.config.Copy())
	t.Cleanup(func() { db.Close() })
	return db
}

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
