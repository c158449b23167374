package sqllease_test

import (
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// tableExists reports whether db has a table named name (unqualified, in
// the search path or the main database).
func tableExists(t testing.TB, db *sql.DB, d sqllease.Dialect, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	if d == sqllease.Postgres {
		q = `SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1`
	}
	var n int
	if err := db.QueryRowContext(t.Context(), q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestNothingIsCreatedBehindTheUsersBack: without CreateSchema every call
// is ErrSchema, saying what to call, and no table appears.
func TestNothingIsCreatedBehindTheUsersBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db := d.handle(t)
		c, err := sqllease.New(db, sqllease.Options{TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := leasefence.NewLockClient("agent-a", time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		req, err := cl.BeginAcquire("r")
		if err != nil {
			t.Fatal(err)
		}
		tok := leasefence.Token{Resource: "r", Holder: "agent-a", Fence: 1}
		calls := map[string]func() error{
			"Acquire": func() error { _, err := c.Acquire(t.Context(), req); return err },
			"Renew": func() error {
				_, err := c.Renew(t.Context(), leasefence.RenewRequest{RequestID: "x", Token: tok})
				return err
			},
			"Release": func() error { _, err := c.Release(t.Context(), tok); return err },
			"Holder":  func() error { _, _, err := c.Holder(t.Context(), "r"); return err },
			"Lock": func() error {
				_, err := sqllease.Lock(t.Context(), db, "r", sqllease.LockOptions{})
				return err
			},
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, sqllease.ErrSchema) {
				t.Errorf("%s without the tables = %v, want ErrSchema", name, err)
			}
		}
		for _, name := range []string{sqllease.DefaultTable, sqllease.DefaultTable + "_requests", sqllease.DefaultTable + "_meta"} {
			if tableExists(t, db, d.dialect(), name) {
				t.Errorf("table %s exists after calls that may create nothing", name)
			}
		}
	})
}

// TestCreateSchemaIsIdempotentAndVersioned: a second CreateSchema changes
// nothing (leases and the fence counter stay), and tables at a version
// newer than the package's are refused, untouched.
func TestCreateSchemaIsIdempotentAndVersioned(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db := d.handle(t)
		opts := sqllease.Options{Table: "lf_leases", TTL: time.Minute}
		c := newCoordinator(t, db, opts)
		first := sqltest.MustAcquire(t, c, "agent-a", "r")
		if err := sqllease.CreateSchema(t.Context(), db, opts); err != nil {
			t.Fatalf("CreateSchema again: %v", err)
		}
		if tok, held, err := c.Holder(t.Context(), "r"); err != nil || !held || tok != first {
			t.Fatalf("Holder after CreateSchema again = %v, %v, %v; want %v", tok, held, err, first)
		}
		if next := sqltest.MustAcquire(t, c, "agent-b", "r2"); next.Fence <= first.Fence {
			t.Fatalf("fence %d after %d: the counter went back", next.Fence, first.Fence)
		}
		if _, err := db.ExecContext(t.Context(), `UPDATE lf_leases_meta SET version = 99`); err != nil {
			t.Fatal(err)
		}
		if err := sqllease.CreateSchema(t.Context(), db, opts); !errors.Is(err, sqllease.ErrSchema) {
			t.Fatalf("CreateSchema over version 99 = %v, want ErrSchema", err)
		}
		fresh, err := sqllease.New(db, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := fresh.Holder(t.Context(), "r"); !errors.Is(err, sqllease.ErrSchema) {
			t.Fatalf("a coordinator on tables at version 99 = %v, want ErrSchema", err)
		}
	})
}

// TestTablesInAnotherSchema: Options.Table may name a PostgreSQL schema.
func TestTablesInAnotherSchema(t *testing.T) {
	d := openPostgres(t)
	db := d.handle(t)
	var schema string
	if err := db.QueryRowContext(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE SCHEMA `+schema+`_locks`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(t.Context(), `DROP SCHEMA `+schema+`_locks CASCADE`) })
	c := newCoordinator(t, db, sqllease.Options{Table: schema + "_locks.leases", TTL: time.Minute})
	sqltest.MustAcquire(t, c, "agent-a", "r")
	if tableExists(t, db, sqllease.Postgres, sqllease.DefaultTable) {
		t.Errorf("the default table was created beside the named one")
	}
}

// TestFencesSurviveAReopen: every handle closed (a restart of every
// process, or of the SQLite file's users) and a new one opened, the next
// fence is still above every fence issued, and a request id granted
// before is answered "stale-request" once its lease was released.
func TestFencesSurviveAReopen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		opts := sqllease.Options{TTL: time.Minute}
		before := d.handle(t)
		c := newCoordinator(t, before, opts)
		cl := client(t, "agent-a")
		req, err := cl.BeginAcquire("r")
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Acquire(t.Context(), req)
		if err != nil || !out.OK {
			t.Fatalf("Acquire = %+v, %v", out, err)
		}
		if rel, err := c.Release(t.Context(), out.Grant.Token); err != nil || !rel.OK {
			t.Fatalf("Release = %+v, %v", rel, err)
		}
		before.Close()
		after, err := sqllease.New(d.handle(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := after.Acquire(t.Context(), req); err != nil || again.Reason != leasefence.ReasonStaleRequest {
			t.Fatalf("the released request again after the reopen = %+v, %v; want stale-request", again, err)
		}
		if next := sqltest.MustAcquire(t, after, "agent-b", "other"); next.Fence <= out.Grant.Token.Fence {
			t.Fatalf("fence %d after the reopen, %d before", next.Fence, out.Grant.Token.Fence)
		}
	})
}

func client(t testing.TB, holder string) *leasefence.Client {
	t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestARolledBackAcquireIssuesNothing: an acquire whose transaction fails
// after it took a fence from the counter (its request id's insert fails)
// rolls back with it: no lease, and the retried request is granted the
// very fence the failed one took, still above every fence issued before.
func TestARolledBackAcquireIssuesNothing(t *testing.T) {
	d := openPostgres(t).(*postgresDB)
	var failing atomic.Bool
	db := d.hooked(t, func(q string) (string, func(), error) {
		if failing.Load() && strings.Contains(q, "_requests (request_id") {
			return "", nil, errors.New("injected: the connection broke")
		}
		return q, nil, nil
	})
	c := newCoordinator(t, db, sqllease.Options{TTL: time.Minute})
	before := sqltest.MustAcquire(t, c, "agent-a", "r1")
	req, err := client(t, "agent-b").BeginAcquire("r2")
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	if out, err := c.Acquire(t.Context(), req); err == nil {
		t.Fatalf("Acquire with the request's insert failing = %+v, want the error", out)
	}
	failing.Store(false)
	if tok, held, err := c.Holder(t.Context(), "r2"); err != nil || held {
		t.Fatalf("Holder after the rolled-back acquire = %v, %v, %v; want nobody", tok, held, err)
	}
	out, err := c.Acquire(t.Context(), req)
	if err != nil || !out.OK || out.Grant.Token.Fence != before.Fence+1 {
		t.Fatalf("the retried request = %+v, %v; want a grant of fence %d", out, err, before.Fence+1)
	}
}
