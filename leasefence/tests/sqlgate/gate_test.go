package sqlgate_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// The floor, with its holder, and the whole log survive closing every
// handle and opening the database again.
func TestDurability(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		const r = "orders"
		ctx := t.Context()
		before := time.Now().Add(-time.Minute) // the database's clock may differ a little from ours
		first := d.handle(t)
		ordersTable(t, first, d.dialect())
		g := newGate(t, first, r)
		steps := []struct {
			token leasefence.Token
			want  error
		}{
			{tok(r, "a", 3), nil},
			{tok(r, "b", 2), leasefence.ErrStaleFence},
			{tok(r, "c", 3), leasefence.ErrTokenConflict},
			{tok(r, "d", 5), nil},
			{tok(r, "a", 3), leasefence.ErrStaleFence},
		}
		for _, s := range steps {
			if err := g.Commit(ctx, s.token, insertOrder(s.token, "item")); !errors.Is(err, s.want) {
				t.Fatalf("Commit(%v) = %v, want %v", s.token, err, s.want)
			}
		}
		wantLog, err := g.LogSince(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}

		again := d.handle(t)
		g = newGate(t, again, r)
		checkFloor(t, g, tok(r, "d", 5))
		gotLog, err := g.LogSince(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []leasefence.Rejection{
			{Seq: 1, Resource: r, Holder: "b", Fence: 2, FloorHolder: "a", FloorFence: 3},
			{Seq: 2, Resource: r, Holder: "c", Fence: 3, FloorHolder: "a", FloorFence: 3},
			{Seq: 3, Resource: r, Holder: "a", Fence: 3, FloorHolder: "d", FloorFence: 5},
		}
		if !slices.Equal(gotLog, wantLog) || !slices.Equal(mustRejections(t, g), want) {
			t.Errorf("log after reopening =\n\t%+v\nwant\n\t%+v (as before closing: %+v)", gotLog, want, wantLog)
		}
		for i, e := range gotLog {
			if e.At.Before(before) || e.At.After(time.Now().Add(time.Minute)) || i > 0 && e.At.Before(gotLog[i-1].At) {
				t.Errorf("entry %d logged at %v, not between %v and now in log order", e.Seq, e.At, before)
			}
		}
		// The log goes on where it was, and can be read from a Seq on.
		if err := g.Commit(ctx, tok(r, "e", 4), insertOrder(tok(r, "e", 4), "late")); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("Commit(e@4) = %v, want stale", err)
		}
		tail, err := g.LogSince(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(tail) != 2 || tail[0].Seq != 3 || tail[1].Seq != 4 || tail[1].Holder != "e" {
			t.Errorf("LogSince(2) = %+v, want Seq 3 and e's Seq 4", tail)
		}
		if got := readOrders(t, again, r); len(got) != 2 || got[0].Holder != "a" || got[1].Holder != "d" {
			t.Errorf("orders = %+v, want a's and d's", got)
		}
	})
}

// A write that fails or panics takes the floor down with it: nothing of the
// transaction is applied, and the gate goes on.
func TestRollback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		const r = "orders"
		ctx := t.Context()
		db, g := ordersGate(t, d, r)
		if err := g.Commit(ctx, tok(r, "a", 1), insertOrder(tok(r, "a", 1), "first")); err != nil {
			t.Fatal(err)
		}
		errFull := errors.New("warehouse full")
		failing := func(ctx context.Context, tx *sql.Tx) error {
			if err := insertOrder(tok(r, "b", 2), "partial")(ctx, tx); err != nil {
				return err
			}
			return errFull
		}
		if err := g.Commit(ctx, tok(r, "b", 2), failing); !errors.Is(err, errFull) {
			t.Fatalf("Commit with a failing write = %v, want its error", err)
		}
		check := func(when string) {
			t.Helper()
			checkFloor(t, g, tok(r, "a", 1))
			if got := readOrders(t, db, r); len(got) != 1 {
				t.Errorf("%s: orders = %+v, want only a's", when, got)
			}
			checkLog(t, g, nil)
		}
		check("after a failing write")

		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("recovered %v, want the write's panic", p)
				}
			}()
			_ = g.Commit(ctx, tok(r, "c", 3), func(ctx context.Context, tx *sql.Tx) error {
				if err := insertOrder(tok(r, "c", 3), "partial")(ctx, tx); err != nil {
					return err
				}
				panic("boom")
			})
			t.Error("Commit returned from a panicking write")
		}()
		check("after a panicking write")

		// Fence 2 was never admitted, so it still may write.
		if err := g.Commit(ctx, tok(r, "b", 2), insertOrder(tok(r, "b", 2), "second")); err != nil {
			t.Fatalf("Commit(b@2) after the rollbacks = %v", err)
		}
		checkFloor(t, g, tok(r, "b", 2))
	})
}

// A ctx cancelled while the write runs rolls it back, floor included; a
// Commit cancelled while it waits for another transaction's lock gives up
// without being judged or logged.
func TestCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		const r = "orders"
		db, g := ordersGate(t, d, r)
		if err := g.Commit(t.Context(), tok(r, "a", 1), insertOrder(tok(r, "a", 1), "first")); err != nil {
			t.Fatal(err)
		}

		ctx, cancel := context.WithCancel(t.Context())
		err := g.Commit(ctx, tok(r, "b", 2), func(ctx context.Context, tx *sql.Tx) error {
			if err := insertOrder(tok(r, "b", 2), "cancelled")(ctx, tx); err != nil {
				return err
			}
			cancel() // mid-write: the next statement, or the commit, meets it
			return insertOrder(tok(r, "b", 2), "cancelled too")(ctx, tx)
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit cancelled mid-write = %v, want context.Canceled", err)
		}
		checkFloor(t, g, tok(r, "a", 1))
		if got := readOrders(t, db, r); len(got) != 1 {
			t.Errorf("orders = %+v, want only a's", got)
		}

		// A write holds the floor (and on SQLite the database) while a second
		// Commit, from another handle, waits until its ctx ends.
		other := newGate(t, d.handle(t), r)
		holding, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- g.Commit(t.Context(), tok(r, "c", 3), func(ctx context.Context, tx *sql.Tx) error {
				close(holding)
				<-release
				return insertOrder(tok(r, "c", 3), "slow")(ctx, tx)
			})
		}()
		<-holding
		waitCtx, stop := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer stop()
		if err := other.Commit(waitCtx, tok(r, "a", 1), insertOrder(tok(r, "a", 1), "stale")); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Commit waiting on a held floor until its deadline = %v, want DeadlineExceeded", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("the holding Commit = %v", err)
		}
		checkLog(t, g, nil)
		checkFloor(t, g, tok(r, "c", 3))
	})
}

func TestBadArguments(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		const r = "orders"
		ctx := t.Context()
		db, g := ordersGate(t, d, r)
		if err := g.Commit(ctx, tok(r, "a", 2), insertOrder(tok(r, "a", 2), "ok")); err != nil {
			t.Fatal(err)
		}
		var nilCtx context.Context
		write := insertOrder(tok(r, "x", 9), "forged")
		for _, c := range []struct {
			name string
			err  error
			want error
		}{
			{"New with a nil ctx", second(sqlgate.New(nilCtx, db, r)), leasefence.ErrInvalidRequest},
			{"New with a nil db", second(sqlgate.New(ctx, nil, r)), leasefence.ErrInvalidRequest},
			{"New with an empty resource", second(sqlgate.New(ctx, db, "")), leasefence.ErrInvalidRequest},
			{"New with an unknown dialect", second(sqlgate.New(ctx, db, r, sqlgate.WithDialect(7))), leasefence.ErrInvalidRequest},
			{"New with a hostile prefix", second(sqlgate.New(ctx, db, r, sqlgate.WithTablePrefix("x; DROP TABLE orders; --"))), leasefence.ErrInvalidRequest},
			{"New with no attempts", second(sqlgate.New(ctx, db, r, sqlgate.WithRetry(0, time.Millisecond))), leasefence.ErrInvalidRequest},
			{"New with no backoff", second(sqlgate.New(ctx, db, r, sqlgate.WithRetry(3, 0))), leasefence.ErrInvalidRequest},
			{"New with a huge initial floor", second(sqlgate.New(ctx, db, r, sqlgate.WithInitialFloor(math.MaxInt64+1))), leasefence.ErrInvalidRequest},
			{"Commit with a nil ctx", g.Commit(nilCtx, tok(r, "x", 9), write), leasefence.ErrInvalidRequest},
			{"Commit with a nil write", g.Commit(ctx, tok(r, "x", 9), nil), leasefence.ErrInvalidRequest},
			{"Commit with no holder", g.Commit(ctx, tok(r, "", 9), write), leasefence.ErrInvalidRequest},
			{"Commit with fence 0", g.Commit(ctx, tok(r, "x", 0), write), leasefence.ErrInvalidRequest},
			{"Commit for another resource", g.Commit(ctx, tok("other", "x", 9), write), leasefence.ErrWrongResource},
			{"Commit with a huge fence", g.Commit(ctx, tok(r, "x", math.MaxInt64+1), write), sqlgate.ErrFenceRange},
			{"Admit with a nil ctx", g.Admit(nilCtx, tok(r, "x", 9)), leasefence.ErrInvalidRequest},
			{"Admit with no holder", g.Admit(ctx, tok(r, "", 9)), leasefence.ErrInvalidRequest},
			{"Admit for another resource", g.Admit(ctx, tok("other", "x", 9)), leasefence.ErrWrongResource},
			{"Admit with a huge fence", g.Admit(ctx, tok(r, "x", math.MaxUint64)), sqlgate.ErrFenceRange},
			{"Floor with a nil ctx", second(g.Floor(nilCtx)), leasefence.ErrInvalidRequest},
			{"Rejections with a nil ctx", second(g.Rejections(nilCtx)), leasefence.ErrInvalidRequest},
		} {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s = %v, want %v", c.name, c.err, c.want)
			}
		}
		checkFloor(t, g, tok(r, "a", 2))
		checkLog(t, g, nil)
		if got := readOrders(t, db, r); len(got) != 1 {
			t.Errorf("orders = %+v, want one", got)
		}
	})
}

func second[T any](_ T, err error) error { return err }

// A Commit of the same gate from inside its write would wait on the floor
// row its own transaction holds: it is refused at once, and the outer write
// goes on.
func TestNestedCommit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		const r = "orders"
		db, g := ordersGate(t, d, r)
		twin := newGate(t, db, r) // another Gate value on the same floor
		var nested []error
		err := g.Commit(t.Context(), tok(r, "a", 1), func(ctx context.Context, tx *sql.Tx) error {
			nested = append(nested, g.Commit(ctx, tok(r, "a", 1), insertOrder(tok(r, "a", 1), "inner")))
			nested = append(nested, twin.Commit(ctx, tok(r, "b", 2), insertOrder(tok(r, "b", 2), "inner")))
			return insertOrder(tok(r, "a", 1), "outer")(ctx, tx)
		})
		if err != nil {
			t.Fatalf("outer Commit = %v", err)
		}
		for i, err := range nested {
			if !errors.Is(err, sqlgate.ErrNestedCommit) {
				t.Errorf("nested Commit %d = %v, want ErrNestedCommit", i, err)
			}
		}
		if got := readOrders(t, db, r); len(got) != 1 || got[0].Item != "outer" {
			t.Errorf("orders = %+v, want the outer write only", got)
		}
	})
}

// An Admit of the same gate from inside its write would wait on the floor
// row the write's transaction holds, as a nested Commit would: it is refused
// at once with the same error, and the outer write goes on.
func TestNestedAdmit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		const r = "orders"
		db, g := ordersGate(t, d, r)
		twin := newGate(t, db, r)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var nested []error
		err := g.Commit(ctx, tok(r, "a", 1), func(ctx context.Context, tx *sql.Tx) error {
			nested = append(nested, g.Admit(ctx, tok(r, "b", 2)), twin.Admit(ctx, tok(r, "b", 3)))
			return insertOrder(tok(r, "a", 1), "outer")(ctx, tx)
		})
		if err != nil {
			t.Fatalf("outer Commit = %v", err)
		}
		for i, err := range nested {
			if !errors.Is(err, sqlgate.ErrNestedCommit) {
				t.Errorf("nested Admit %d = %v, want ErrNestedCommit", i, err)
			}
		}
		checkFloor(t, g, tok(r, "a", 1))
	})
}

// Admit raises the floor with no write, and a later Commit below it is
// refused and logged against the admitted holder.
func TestInitialFloor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		const r = "orders"
		ctx := t.Context()
		db := d.handle(t)
		ordersTable(t, db, d.dialect())
		g := newGate(t, db, r, sqlgate.WithInitialFloor(10))
		checkFloor(t, g, leasefence.Token{Resource: r, Fence: 10})
		if err := g.Commit(ctx, tok(r, "a", 9), insertOrder(tok(r, "a", 9), "x")); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Errorf("Commit(a@9) below the initial floor = %v, want stale", err)
		}
		if err := g.Commit(ctx, tok(r, "b", 10), insertOrder(tok(r, "b", 10), "x")); err != nil {
			t.Errorf("Commit(b@10) at the initial floor = %v, want admitted", err)
		}
		// Reopening with a lower initial floor leaves the floor alone.
		g = newGate(t, db, r, sqlgate.WithInitialFloor(4))
		checkFloor(t, g, tok(r, "b", 10))
		want := []leasefence.Rejection{{Seq: 1, Resource: r, Holder: "a", Fence: 9, FloorHolder: "", FloorFence: 10}}
		checkLog(t, g, want)
	})
}

// A table of the gate's name with other columns is a collision, reported
// and left alone; another prefix avoids it.
func TestTableCollision(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		ctx := t.Context()
		db := d.handle(t)
		if _, err := db.ExecContext(ctx, `CREATE TABLE leasefence_floor (id BIGINT PRIMARY KEY, name TEXT)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO leasefence_floor (id, name) VALUES (1, 'theirs')`); err != nil {
			t.Fatal(err)
		}
		_, err := sqlgate.New(ctx, db, "orders")
		if !errors.Is(err, sqlgate.ErrSchema) {
			t.Fatalf("New over a foreign leasefence_floor = %v, want ErrSchema", err)
		}
		t.Logf("the error says: %v", err)
		// A table with the right names but the wrong types collides too.
		if _, err := db.ExecContext(ctx, `CREATE TABLE lf2_floor (resource TEXT PRIMARY KEY, holder TEXT, fence TEXT, refused BIGINT)`); err != nil {
			t.Fatal(err)
		}
		if _, err := sqlgate.New(ctx, db, "orders", sqlgate.WithTablePrefix("lf2_")); !errors.Is(err, sqlgate.ErrSchema) {
			t.Errorf("New over a floor table whose fence is TEXT = %v, want ErrSchema", err)
		}

		g := newGate(t, db, "orders", sqlgate.WithTablePrefix("gate_"))
		if err := g.Admit(ctx, tok("orders", "a", 1)); err != nil {
			t.Fatal(err)
		}
		var name string
		if err := db.QueryRowContext(ctx, `SELECT name FROM leasefence_floor WHERE id = 1`).Scan(&name); err != nil || name != "theirs" {
			t.Errorf("the foreign table was touched: %q, %v", name, err)
		}
	})
}

// A database the gate may not write to is a clear error, not a refusal.
func TestReadOnlySQLite(t *testing.T) {
	ctx := t.Context()
	d := openSQLite(t).(*sqliteDB)
	rw := d.handle(t)
	if _, err := rw.ExecContext(ctx, `CREATE TABLE unrelated (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	ro := d.Open(t, "mode=ro")
	_, err := sqlgate.New(ctx, ro, "orders")
	if !errors.Is(err, sqlgate.ErrSchema) {
		t.Fatalf("New on a read-only database without the tables = %v, want ErrSchema", err)
	}
	t.Logf("the error says: %v", err)

	// With the tables made by a writer, a read-only gate can read the floor
	// and the log; its Commit fails without claiming a refusal.
	w := newGate(t, rw, "orders")
	if err := w.Commit(ctx, tok("orders", "a", 2), func(context.Context, *sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	g := newGate(t, ro, "orders")
	checkFloor(t, g, tok("orders", "a", 2))
	err = g.Commit(ctx, tok("orders", "b", 1), func(context.Context, *sql.Tx) error { return nil })
	if err == nil || errors.Is(err, leasefence.ErrStaleFence) {
		t.Errorf("Commit on a read-only database = %v, want an error that is not a refusal", err)
	}
	if _, err := sqlgate.New(ctx, ro, "another"); err == nil {
		t.Error("New of a new resource on a read-only database succeeded")
	}
}

// A role without the right to create tables gets a clear error; once the
// tables exist and it may use them, it can commit.
func TestPostgresPermission(t *testing.T) {
	d := openPostgres(t).(*postgresDB)
	ctx := t.Context()
	admin := d.handle(t)
	role := d.Schema + "_worker"
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT USAGE ON SCHEMA ` + d.Schema + ` TO ` + role,
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := d.handle(t).ExecContext(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	worker := d.Open(t, role, nil)
	_, err := sqlgate.New(ctx, worker, "orders")
	if !errors.Is(err, sqlgate.ErrSchema) {
		t.Fatalf("New as a role without CREATE = %v, want ErrSchema", err)
	}
	t.Logf("the error says: %v", err)

	newGate(t, admin, "orders") // the tables, made ahead by the owner
	if _, err := sqlgate.New(ctx, worker, "orders"); !errors.Is(err, sqlgate.ErrSchema) {
		t.Errorf("New as a role that may not read the tables = %v, want ErrSchema", err)
	}
	if _, err := admin.ExecContext(ctx, `GRANT SELECT, INSERT, UPDATE ON leasefence_floor, leasefence_rejections TO `+role); err != nil {
		t.Fatal(err)
	}
	g := newGate(t, worker, "orders")
	if err := g.Commit(ctx, tok("orders", "a", 1), func(context.Context, *sql.Tx) error { return nil }); err != nil {
		t.Errorf("Commit as the granted role = %v", err)
	}
	if err := g.Commit(ctx, tok("orders", "b", 1), func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, leasefence.ErrTokenConflict) {
		t.Errorf("Commit(b@1) as the granted role = %v, want a logged conflict", err)
	}
}

// A busy database is retried, a bounded number of times, and then reported
// as ErrBusy: never as a refusal, never logged.
func TestBusySQLite(t *testing.T) {
	ctx := t.Context()
	d := openSQLite(t).(*sqliteDB)
	noWait := d.Open(t, "_pragma=journal_mode(WAL)&_pragma=busy_timeout(0)")
	g := newGate(t, noWait, "orders", sqlgate.WithRetry(3, time.Millisecond))

	locker := d.handle(t)
	conn, err := locker.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	ran := false
	err = g.Commit(ctx, tok("orders", "a", 1), func(context.Context, *sql.Tx) error { ran = true; return nil })
	if !errors.Is(err, sqlgate.ErrBusy) || errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("Commit on a locked database = %v, want ErrBusy", err)
	}
	if ran {
		t.Error("the write ran although the floor was never judged")
	}
	t.Logf("the error says: %v", err)

	// Released while the gate backs off, the database admits the retry.
	g = newGate(t, noWait, "orders", sqlgate.WithRetry(50, time.Millisecond))
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(30*time.Millisecond, func() { _, _ = conn.ExecContext(context.Background(), `ROLLBACK`) })
	if err := g.Commit(ctx, tok("orders", "a", 1), func(context.Context, *sql.Tx) error { return nil }); err != nil {
		t.Fatalf("Commit retried until the lock was released = %v", err)
	}
	checkLog(t, g, nil)
}

// Under SERIALIZABLE, a Commit that waited for a concurrent update of the
// floor row is aborted by PostgreSQL (serialization_failure): retried, it is
// judged against the new floor; with no retry left, it is ErrBusy.
func TestSerializationPostgres(t *testing.T) {
	d := openPostgres(t).(*postgresDB)
	ctx := t.Context()
	admin := d.handle(t)
	serializable := d.Open(t, "", map[string]string{"default_transaction_isolation": "serializable"})
	newGate(t, admin, "orders")

	for _, c := range []struct {
		attempts int
		want     error
	}{{1, sqlgate.ErrBusy}, {5, nil}} {
		g := newGate(t, serializable, "orders", sqlgate.WithRetry(c.attempts, time.Millisecond))
		tx, err := admin.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leasefence_floor SET refused = refused WHERE resource = 'orders'`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			done <- g.Commit(ctx, tok("orders", "a", 1), func(context.Context, *sql.Tx) error { return nil })
		}()
		waitForLockWait(t, admin, "leasefence_floor")
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		err = <-done
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("with %d attempts: Commit after a concurrent update = %v, want %v", c.attempts, err, c.want)
		}
		t.Logf("with %d attempts: %v", c.attempts, err)
	}
}

// waitForLockWait waits until a session of the database waits for a lock
// in a statement that names table.
func waitForLockWait(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND position($1 IN query) > 0`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no session started waiting for a lock in a statement on %s", table)
}

// fakeDriver is a driver of no known dialect.
type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fake driver: no connections")
}

func TestDialect(t *testing.T) {
	ctx := t.Context()
	sqliteDB := openSQLite(t).handle(t)
	if g := newGate(t, sqliteDB, "r"); g.Dialect() != sqlgate.SQLite {
		t.Errorf("dialect of modernc.org/sqlite = %v", g.Dialect())
	}
	fake := sql.OpenDB(fakeConnector{})
	defer fake.Close()
	if _, err := sqlgate.New(ctx, fake, "r"); !errors.Is(err, sqlgate.ErrUnknownDialect) {
		t.Errorf("New on an unknown driver = %v, want ErrUnknownDialect", err)
	}
	// Named, the dialect is taken as given (and the fake driver then fails
	// to connect, which is not a dialect error).
	if _, err := sqlgate.New(ctx, fake, "r", sqlgate.WithDialect(sqlgate.Postgres)); err == nil || errors.Is(err, sqlgate.ErrUnknownDialect) {
		t.Errorf("New on a named dialect = %v, want a connection error", err)
	}
	for d, want := range map[sqlgate.Dialect]string{sqlgate.SQLite: "SQLite", sqlgate.Postgres: "PostgreSQL", 9: "Dialect(9)"} {
		if d.String() != want {
			t.Errorf("Dialect(%d).String() = %q, want %q", int(d), d.String(), want)
		}
	}
	if os.Getenv(sqltest.PGURLEnv) != "" {
		pg := openPostgres(t).handle(t)
		if g := newGate(t, pg, "r"); g.Dialect() != sqlgate.Postgres {
			t.Errorf("dialect of pgx = %v", g.Dialect())
		}
	}
}

type fakeConnector struct{}

func (fakeConnector) Connect(context.Context) (driver.Conn, error) { return fakeDriver{}.Open("") }
func (fakeConnector) Driver() driver.Driver                        { return fakeDriver{} }

// On PostgreSQL a Commit under the floor's own token locks the floor row
// without writing a new version of it (which would grow a chain of dead
// versions on a row a holder commits under again and again); a new fence
// rewrites it, and so does, once, the first commit of a gate new to the
// floor.
func TestPostgresFloorRowRewrittenOnlyWhenItRises(t *testing.T) {
	d := openPostgres(t)
	ctx := t.Context()
	db := d.handle(t)
	g := newGate(t, db, "orders")
	version := func() string {
		t.Helper()
		var xmin string
		if err := db.QueryRowContext(ctx, `SELECT xmin::text FROM leasefence_floor WHERE resource = 'orders'`).Scan(&xmin); err != nil {
			t.Fatal(err)
		}
		return xmin
	}
	// commit commits n times under tk through gate and returns the row's
	// version after the first commit and after the last.
	commit := func(gate *sqlgate.Gate, tk leasefence.Token, n int) (first, last string) {
		t.Helper()
		for i := range n {
			if err := gate.Commit(ctx, tk, func(context.Context, *sql.Tx) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = version()
			}
		}
		return first, version()
	}
	raised, v := commit(g, tok("orders", "a", 1), 4)
	if v != raised {
		t.Errorf("the floor row was rewritten by commits under its own token (xmin %s, then %s)", raised, v)
	}
	if v, _ := commit(g, tok("orders", "b", 2), 1); v == raised {
		t.Error("the floor row was not rewritten when the floor rose")
	}
	// A gate new to the floor sends its first commit as a raise, which
	// rewrites the row once; after that it has seen the floor.
	if seen, v := commit(newGate(t, db, "orders"), tok("orders", "b", 2), 4); v != seen {
		t.Errorf("a gate new to the floor rewrote its row on every commit (xmin %s, then %s)", seen, v)
	}
}
