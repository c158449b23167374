// Package sqltest opens the databases the SQL tests run on: a SQLite file
// of a test's own, or a schema of a test's own on the PostgreSQL server
// LEASEFENCE_PG_URL names; a test that needs PostgreSQL skips, saying how
// to start one, when it is unset. Every handle and schema is closed or
// dropped when the test ends.
package sqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/leasefence/lab/leasefence"
)

// PGURLEnv names the PostgreSQL server the tests use when it is set.
const PGURLEnv = "LEASEFENCE_PG_URL"

// SQLiteParams are the parameters a careful deployment opens SQLite with:
// WAL mode and a busy timeout.
const SQLiteParams = "_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"

// SQLite is one SQLite file in a temporary directory of the test's.
type SQLite struct{ Path string }

// NewSQLite names a file in t's temporary directory; nothing is created
// until a handle writes.
func NewSQLite(t testing.TB, name string) *SQLite {
	return &SQLite{Path: filepath.Join(t.TempDir(), name)}
}

// Open opens a handle on the file with params (SQLiteParams, or others for
// a test of them), closed when t ends: two handles stand for two
// processes.
func (d *SQLite) Open(t testing.TB, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+d.Path+"?"+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// PGConfig is the configuration LEASEFENCE_PG_URL names; it skips t when
// that is unset.
func PGConfig(t testing.TB) *pgx.ConnConfig {
	t.Helper()
	url := os.Getenv(PGURLEnv)
	if url == "" {
		t.Skipf("%s is not set: PostgreSQL tests skipped (start a throwaway server with scripts/postgres.sh start, then eval \"$(scripts/postgres.sh env)\")", PGURLEnv)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatalf("%s: %v", PGURLEnv, err)
	}
	return cfg
}

// Postgres is a schema of its own on the server LEASEFENCE_PG_URL names;
// every handle has it as its search_path.
type Postgres struct {
	Config *pgx.ConnConfig
	Schema string
}

// NewPostgres creates the schema, dropped when t ends; it skips t without
// LEASEFENCE_PG_URL.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	cfg := PGConfig(t)
	admin := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { admin.Close() })
	schema := "lf_test_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("creating schema %s on %s: %v", schema, os.Getenv(PGURLEnv), err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	cfg.RuntimeParams["search_path"] = schema
	return &Postgres{Config: cfg, Schema: schema}
}

// Open opens a handle that logs in as user ("" for the URL's), with extra
// run-time parameters, closed when t ends.
func (d *Postgres) Open(t testing.TB, user string, params map[string]string) *sql.DB {
	t.Helper()
	cfg := d.Config.Copy()
	if user != "" {
		cfg.User = user
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	return db
}

// OpenCounted opens a handle as Open does (the URL's user, no extra
// parameters) whose statements the returned counter counts: on PostgreSQL
// each statement is a round trip.
func (d *Postgres) OpenCounted(t testing.TB) (*sql.DB, *StatementCounter) {
	t.Helper()
	cfg := d.Config.Copy()
	counter := &StatementCounter{}
	cfg.Tracer = counter
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	return db, counter
}

// StatementCounter counts the statements sent on the pgx connections it
// traces.
type StatementCounter struct{ n atomic.Int64 }

// N is the number of statements sent so far.
func (c *StatementCounter) N() int64 { return c.n.Load() }

// TraceQueryStart counts a statement.
func (c *StatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing.
func (*StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// MustAcquire acquires resource for holder, a client of its own, through
// svc, and fails t unless it is granted.
func MustAcquire(t testing.TB, svc leasefence.Service, holder, resource string) leasefence.Token {
	t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.BeginAcquire(resource)
	if err != nil {
		t.Fatal(err)
	}
	out, err := svc.Acquire(t.Context(), req)
	if err != nil || !out.OK {
		t.Fatalf("Acquire(%q) by %s = %+v, %v", resource, holder, out, err)
	}
	return out.Grant.Token
}
