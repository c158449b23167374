package sqlgate_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

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
type sqliteDB struct{ *sqltest.SQLite }

func openSQLite(t testing.TB) database { return &sqliteDB{sqltest.NewSQLite(t, "gate.db")} }

func (*sqliteDB) dialect() sqlgate.Dialect { return sqlgate.SQLite }

func (d *sqliteDB) handle(t testing.TB) *sql.DB { return d.Open(t, sqltest.SQLiteParams) }

// postgresDB is a schema of its own on the server LEASEFENCE_PG_URL names.
type postgresDB struct{ *sqltest.Postgres }

func openPostgres(t testing.TB) database { return &postgresDB{sqltest.NewPostgres(t)} }

func (*postgresDB) dialect() sqlgate.Dialect { return sqlgate.Postgres }

func (d *postgresDB) handle(t testing.TB) *sql.DB { return d.Open(t, "", nil) }

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
