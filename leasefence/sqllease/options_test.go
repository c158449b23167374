package sqllease_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqllease"
)

// stubDriver is a driver of no known dialect that never connects: New and
// CreateSchema must refuse what they can before anything is sent.
type stubDriver struct{}

func (stubDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("stub driver: never connects")
}

func init() { sql.Register("sqllease-stub", stubDriver{}) }

func stubDB(t *testing.T) *sql.DB {
	db, err := sql.Open("sqllease-stub", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestNewRefusesBadOptions(t *testing.T) {
	db := stubDB(t)
	ok := sqllease.Options{TTL: time.Second, Dialect: sqllease.Postgres}
	for _, tc := range []struct {
		name string
		db   *sql.DB
		edit func(o *sqllease.Options)
		want error
	}{
		{"nil db", nil, func(*sqllease.Options) {}, leasefence.ErrInvalidRequest},
		{"no TTL", db, func(o *sqllease.Options) { o.TTL = 0 }, leasefence.ErrInvalidRequest},
		{"negative TTL", db, func(o *sqllease.Options) { o.TTL = -time.Second }, leasefence.ErrInvalidRequest},
		{"TTL below 1µs", db, func(o *sqllease.Options) { o.TTL = time.Nanosecond }, leasefence.ErrInvalidRequest},
		{"TTL not whole µs", db, func(o *sqllease.Options) { o.TTL = 1500 * time.Nanosecond }, leasefence.ErrInvalidRequest},
		{"negative replay window", db, func(o *sqllease.Options) { o.ReplayWindow = -time.Second }, leasefence.ErrInvalidRequest},
		{"table with a quote", db, func(o *sqllease.Options) { o.Table = `leases"; DROP TABLE x; --` }, leasefence.ErrInvalidRequest},
		{"table with two dots", db, func(o *sqllease.Options) { o.Table = "a.b.c" }, leasefence.ErrInvalidRequest},
		{"table starting with a digit", db, func(o *sqllease.Options) { o.Table = "1leases" }, leasefence.ErrInvalidRequest},
		{"dialect out of range", db, func(o *sqllease.Options) { o.Dialect = 7 }, leasefence.ErrInvalidRequest},
		{"driver of no known dialect", db, func(o *sqllease.Options) { o.Dialect = 0 }, sqllease.ErrUnknownDialect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ok
			tc.edit(&opts)
			if c, err := sqllease.New(tc.db, opts); !errors.Is(err, tc.want) {
				t.Fatalf("New = %v, %v; want %v", c, err, tc.want)
			}
		})
	}
}

func TestNewTakesGoodOptionsWithoutSending(t *testing.T) {
	db := stubDB(t) // every connection attempt fails: New must not make one
	for _, table := range []string{"", "leases", "lf.leases", "_x9"} {
		c, err := sqllease.New(db, sqllease.Options{Table: table, TTL: time.Second, Dialect: sqllease.SQLite})
		if err != nil || c.Dialect() != sqllease.SQLite {
			t.Fatalf("New(Table %q) = %v, %v", table, c, err)
		}
	}
}

func TestCreateSchemaRefusesBadCallsBeforeSending(t *testing.T) {
	db := stubDB(t)
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		ctx  context.Context
		db   *sql.DB
		opts sqllease.Options
		want error
	}{
		{"nil ctx", nilCtx, db, sqllease.Options{Dialect: sqllease.SQLite}, leasefence.ErrInvalidRequest},
		{"nil db", t.Context(), nil, sqllease.Options{Dialect: sqllease.SQLite}, leasefence.ErrInvalidRequest},
		{"bad table", t.Context(), db, sqllease.Options{Table: "a-b", Dialect: sqllease.SQLite}, leasefence.ErrInvalidRequest},
		{"unknown dialect", t.Context(), db, sqllease.Options{}, sqllease.ErrUnknownDialect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := sqllease.CreateSchema(tc.ctx, tc.db, tc.opts); !errors.Is(err, tc.want) {
				t.Fatalf("CreateSchema = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDialectString(t *testing.T) {
	for d, want := range map[sqllease.Dialect]string{sqllease.SQLite: "SQLite", sqllease.Postgres: "PostgreSQL", 9: "Dialect(9)"} {
		if got := d.String(); got != want {
			t.Errorf("Dialect(%d).String() = %q, want %q", int(d), got, want)
		}
	}
}
