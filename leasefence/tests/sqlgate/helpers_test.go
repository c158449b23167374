package sqlgate_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// pgURLEnv names the PostgreSQL server the tests use when it is set.
const pgURLEnv = "LEASEFENCE_PG_URL"

// database is one empty database of a backend, from which any number of
// *sql.DB handles can be opened: two handles stand for two processes.
type database interface {
	dialect() sqlgate.Dialect
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

// sqliteDB is a SQLite file in WAL mode. The busy timeout stands for the
// one a careful deployment sets; tests of busy answers open their own.
type sqliteDB struct{ path string }

func openSQLite(t testing.TB) database {
	return &sqliteDB{path: filepath.Join(t.TempDir(), "gate.db")}
}

func (*sqliteDB) dialect() sqlgate.Dialect { return sqlgate.SQLite }

func (d *sqliteDB) handle(t testing.TB) *sql.DB {
	return d.handleWith(t, "_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
}

func (d *sqliteDB) handleWith(t testing.TB, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+d.path+"?"+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// postgresDB is a schema of its own on the server LEASEFENCE_PG_URL names,
// dropped when the test ends; every handle has it as its search_path.
type postgresDB struct {
	config *pgx.ConnConfig
	schema string
}

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
	return &postgresDB{config: cfg, schema: schema}
}

func (*postgresDB) dialect() sqlgate.Dialect { return sqlgate.Postgres }

func (d *postgresDB) handle(t testing.TB) *sql.DB {
	return d.handleAs(t, d.config.User, nil)
}

// handleAs opens a handle that logs in as user, with extra run-time
// parameters.
func (d *postgresDB) handleAs(t testing.TB, user string, params map[string]string) *sql.DB {
	t.Helper()
	cfg := d.config.Copy()
	cfg.User = user
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	return db
}

// ordersTable creates the table the tests' writes go to: one row per
// admitted write, numbered in the order the writes landed.
func ordersTable(t testing.TB, db *sql.DB, d sqlgate.Dialect) {
	t.Helper()
	id := "id INTEGER PRIMARY KEY AUTOINCREMENT"
	if d == sqlgate.Postgres {
		id = "id BIGSERIAL PRIMARY KEY"
	}
	if _, err := db.ExecContext(context.Background(),
		`CREATE TABLE IF NOT EXISTS orders (`+id+`, resource TEXT NOT NULL, holder TEXT NOT NULL, fence BIGINT NOT NULL, item TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

// insertOrder is a write: one order row under t. The tests' statements use
// each $n once, in order, which SQLite and PostgreSQL both read alike.
func insertOrder(t leasefence.Token, item string) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO orders (resource, holder, fence, item) VALUES ($1, $2, $3, $4)`,
			t.Resource, t.Holder, int64(t.Fence), item)
		return err
	}
}

// order is one row of the orders table.
type order struct {
	Holder string
	Fence  leasefence.Fence
	Item   string
}

func readOrders(t testing.TB, db *sql.DB, resource string) []order {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT holder, fence, item FROM orders WHERE resource = $1 ORDER BY id`, resource)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []order
	for rows.Next() {
		var o order
		var fence int64
		if err := rows.Scan(&o.Holder, &fence, &o.Item); err != nil {
			t.Fatal(err)
		}
		o.Fence = leasefence.Fence(fence)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newGate(t testing.TB, db *sql.DB, resource string, opts ...sqlgate.Option) *sqlgate.Gate {
	t.Helper()
	g, err := sqlgate.New(context.Background(), db, resource, opts...)
	if err != nil {
		t.Fatalf("sqlgate.New(%q): %v", resource, err)
	}
	return g
}

func tok(resource, holder string, f leasefence.Fence) leasefence.Token {
	return leasefence.Token{Resource: resource, Holder: holder, Fence: f}
}

// ordersGate opens a handle on d, with the orders table, and the gate of
// resource on it.
func ordersGate(t testing.TB, d database, resource string) (*sql.DB, *sqlgate.Gate) {
	t.Helper()
	db := d.handle(t)
	ordersTable(t, db, d.dialect())
	return db, newGate(t, db, resource)
}

func mustFloor(t testing.TB, g *sqlgate.Gate) leasefence.Token {
	t.Helper()
	f, err := g.Floor(context.Background())
	if err != nil {
		t.Fatalf("Floor: %v", err)
	}
	return f
}

func checkFloor(t testing.TB, g *sqlgate.Gate, want leasefence.Token) {
	t.Helper()
	if got := mustFloor(t, g); got != want {
		t.Errorf("Floor = %v, want %v", got, want)
	}
}

func mustRejections(t testing.TB, g *sqlgate.Gate) []leasefence.Rejection {
	t.Helper()
	r, err := g.Rejections(context.Background())
	if err != nil {
		t.Fatalf("Rejections: %v", err)
	}
	return r
}

// checkLog fails t unless g's log is want (nil: empty).
func checkLog(t testing.TB, g *sqlgate.Gate, want []leasefence.Rejection) {
	t.Helper()
	if got := mustRejections(t, g); !slices.Equal(got, want) {
		t.Errorf("log =\n\t%+v\nwant\n\t%+v", got, want)
	}
}
