package sqlgate_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// TestBadIDsRefusedUpFront: a stale writer whose holder id is not UTF-8
// got a raw driver error from PostgreSQL and nothing logged, where SQLite
// logged it. Every gate now refuses such ids, and over-long ones, with the
// core's *leasefence.IDError before anything reaches the database.
func TestBadIDsRefusedUpFront(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db, g := ordersGate(t, d, "r")
		ctx := t.Context()
		if err := g.Commit(ctx, tok("r", "b", 7), insertOrder(tok("r", "b", 7), "b1")); err != nil {
			t.Fatal(err)
		}
		for _, bad := range leasetest.BadIDs() {
			t.Run(bad.Name, func(t *testing.T) {
				leasetest.CheckIDError(t, "stale Commit", g.Commit(ctx, tok("r", bad.ID, 5), insertOrder(tok("r", bad.ID, 5), "late")), leasefence.IDHolder, bad.Why)
				leasetest.CheckIDError(t, "fresh Commit", g.Commit(ctx, tok("r", bad.ID, 9), insertOrder(tok("r", bad.ID, 9), "new")), leasefence.IDHolder, bad.Why)
				leasetest.CheckIDError(t, "Admit", g.Admit(ctx, tok("r", bad.ID, 9)), leasefence.IDHolder, bad.Why)
				_, err := sqlgate.New(ctx, db, bad.ID)
				leasetest.CheckIDError(t, "New", err, leasefence.IDResource, bad.Why)
			})
		}
		checkLog(t, g, nil)
		checkFloor(t, g, tok("r", "b", 7))
		if got := readOrders(t, db, "r"); len(got) != 1 {
			t.Errorf("orders %+v, want b1 alone", got)
		}
		// The longest id there is still works end to end, on both.
		long := leasetest.LongestID()
		lg := newGate(t, db, long)
		if err := lg.Commit(ctx, tok(long, long, 9), insertOrder(tok(long, long, 9), "v")); err != nil {
			t.Fatalf("Commit with MaxIDLen ids: %v", err)
		}
		if err := lg.Commit(ctx, tok(long, long, 8), insertOrder(tok(long, long, 8), "late")); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("stale Commit with MaxIDLen ids: %v", err)
		}
		checkLog(t, lg, []leasefence.Rejection{{Seq: 1, Resource: long, Holder: long, Fence: 8, FloorHolder: long, FloorFence: 9}})
	})
}

// TestNestedCommitThroughAnotherHandle: a Commit of the same resource from
// inside a write, made through a second *sql.DB on the same database, waited
// on the floor row the outer transaction holds (for ever on PostgreSQL,
// whose deadlock detector cannot see a wait that goes through the client;
// until the busy timeout on SQLite). The write's context marks the open
// transaction, whatever the handle: ErrNestedCommit, at once.
func TestNestedCommitThroughAnotherHandle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		_, outer := ordersGate(t, d, "r")
		_, inner := ordersGate(t, d, "r")
		_, other := ordersGate(t, d, "elsewhere")
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		t1, t2 := tok("r", "a", 5), tok("r", "b", 9)
		var nestedErr, admitErr, otherErr error
		start := time.Now()
		err := outer.Commit(ctx, t1, func(wctx context.Context, tx *sql.Tx) error {
			nestedErr = inner.Commit(wctx, t2, insertOrder(t2, "inner"))
			admitErr = inner.Admit(wctx, t2)
			if d.dialect() == sqlgate.Postgres {
				// Another resource is another row: it does not wait.
				otherErr = other.Commit(wctx, tok("elsewhere", "a", 1), insertOrder(tok("elsewhere", "a", 1), "x"))
			}
			return insertOrder(t1, "outer")(wctx, tx)
		})
		if err != nil {
			t.Fatalf("outer Commit: %v", err)
		}
		if !errors.Is(nestedErr, sqlgate.ErrNestedCommit) || !errors.Is(admitErr, sqlgate.ErrNestedCommit) {
			t.Fatalf("nested Commit, Admit through another handle = %v, %v; want ErrNestedCommit", nestedErr, admitErr)
		}
		if otherErr != nil {
			t.Errorf("Commit of another resource from inside the write = %v", otherErr)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the nested calls took %v: they waited", took)
		}
		checkFloor(t, inner, t1)
		// Once the write is over, its ctx no longer marks an open transaction.
		var kept context.Context
		if err := outer.Commit(ctx, t1, func(wctx context.Context, tx *sql.Tx) error { kept = wctx; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := inner.Admit(kept, t2); errors.Is(err, sqlgate.ErrNestedCommit) {
			t.Errorf("Admit with the ctx of a finished write = %v", err)
		}
	})
}

// TestRefusalNotLogged: a refusal whose log insert fails is not a silent
// raw error: Commit says the write was refused and not logged
// (leasefence.ErrRefusalNotLogged, with the refusal as judged), and the
// write did not land.
func TestRefusalNotLogged(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db, g := ordersGate(t, d, "r")
		ctx := t.Context()
		if err := g.Commit(ctx, tok("r", "b", 7), insertOrder(tok("r", "b", 7), "b1")); err != nil {
			t.Fatal(err)
		}
		refuseLogInserts(t, db, d.dialect())
		err := g.Commit(ctx, tok("r", "a", 5), insertOrder(tok("r", "a", 5), "late"))
		var nl *leasefence.RefusalNotLoggedError
		if !errors.As(err, &nl) || !errors.Is(err, leasefence.ErrRefusalNotLogged) {
			t.Fatalf("Commit whose refusal cannot be logged = %v, want ErrRefusalNotLogged", err)
		}
		if errors.Is(err, leasefence.ErrStaleFence) {
			t.Errorf("%v matches ErrStaleFence, which promises a logged refusal", err)
		}
		want := leasefence.Rejection{Resource: "r", Holder: "a", Fence: 5, FloorHolder: "b", FloorFence: 7}
		if nl.Rejection != want {
			t.Errorf("refusal %+v, want %+v", nl.Rejection, want)
		}
		if _, err := db.ExecContext(ctx, "DROP TRIGGER no_log"+dropOn(d.dialect())); err != nil {
			t.Fatal(err)
		}
		checkLog(t, g, nil)
		if got := readOrders(t, db, "r"); len(got) != 1 {
			t.Errorf("orders %+v, want b1 alone", got)
		}
		var stale *leasefence.StaleFenceError
		if err := g.Commit(ctx, tok("r", "a", 5), insertOrder(tok("r", "a", 5), "late")); !errors.As(err, &stale) || stale.Seq != 1 {
			t.Fatalf("next stale Commit = %v, want Seq 1", err)
		}
	})
}

// TestRefusalNotLoggedNamesTheFloorItRead: a refusal whose log fails
// before the log has read the floor (the count of refusals is the log's
// first statement; a session cut there fails it) names the floor the
// gate judged by, when it read one: on PostgreSQL, a token at or below the
// floor the Gate last saw is judged under the floor row's lock, which
// read b@7. On SQLite the conditional raise judges alone, reading no
// floor, and the error says so with the zero floor, which no refusal
// names otherwise.
func TestRefusalNotLoggedNamesTheFloorItRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db, g := ordersGate(t, d, "r")
		ctx := t.Context()
		if err := g.Commit(ctx, tok("r", "b", 7), insertOrder(tok("r", "b", 7), "b1")); err != nil {
			t.Fatal(err)
		}
		stmts := []string{`CREATE TRIGGER no_count BEFORE UPDATE OF refused ON leasefence_floor BEGIN SELECT RAISE(ABORT, 'the count is read-only'); END`}
		if d.dialect() == sqlgate.Postgres {
			stmts = []string{
				`CREATE FUNCTION no_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the count is read-only'; END $$`,
				`CREATE TRIGGER no_count BEFORE UPDATE OF refused ON leasefence_floor FOR EACH ROW EXECUTE FUNCTION no_count()`,
			}
		}
		for _, s := range stmts {
			if _, err := db.ExecContext(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		err := g.Commit(ctx, tok("r", "a", 5), insertOrder(tok("r", "a", 5), "late"))
		var nl *leasefence.RefusalNotLoggedError
		if !errors.As(err, &nl) {
			t.Fatalf("Commit whose count fails = %v, want a *leasefence.RefusalNotLoggedError", err)
		}
		want := leasefence.Rejection{Resource: "r", Holder: "a", Fence: 5}
		if d.dialect() == sqlgate.Postgres {
			want.FloorHolder, want.FloorFence = "b", 7
		}
		if nl.Rejection != want {
			t.Errorf("refusal %+v, want %+v", nl.Rejection, want)
		}
		if got := readOrders(t, db, "r"); len(got) != 1 {
			t.Errorf("orders %+v, want b1 alone", got)
		}
	})
}

// refuseLogInserts makes every insert into the gate's log fail, with a
// trigger named no_log.
func refuseLogInserts(t *testing.T, db *sql.DB, d sqlgate.Dialect) {
	t.Helper()
	stmts := []string{`CREATE TRIGGER no_log BEFORE INSERT ON leasefence_rejections BEGIN SELECT RAISE(ABORT, 'the log is read-only'); END`}
	if d == sqlgate.Postgres {
		stmts = []string{
			`CREATE FUNCTION no_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the log is read-only'; END $$`,
			`CREATE TRIGGER no_log BEFORE INSERT ON leasefence_rejections FOR EACH ROW EXECUTE FUNCTION no_log()`,
		}
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
}

func dropOn(d sqlgate.Dialect) string {
	if d == sqlgate.Postgres {
		return " ON leasefence_rejections"
	}
	return ""
}
