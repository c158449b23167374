package sqlgate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

const leaseTTL = 300 * time.Millisecond

// leaseSetup opens a handle on d with the orders table and sqllease's
// tables of opts, and a coordinator on another handle.
func leaseSetup(t testing.TB, d database, opts sqllease.Options) (*sql.DB, *sqllease.Coordinator) {
	t.Helper()
	db := d.handle(t)
	ordersTable(t, db, d.dialect())
	if err := sqllease.CreateSchema(t.Context(), db, opts); err != nil {
		t.Fatal(err)
	}
	coord, err := sqllease.New(d.handle(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return db, coord
}

// wantLeaseNotLive fails t unless err is a logged lease refusal of tok
// with the given Seq, the floor it names admitting tok.
func wantLeaseNotLive(t testing.TB, err error, tok leasefence.Token, seq uint64) {
	t.Helper()
	var lnl *sqlgate.LeaseNotLiveError
	if !errors.Is(err, sqlgate.ErrLeaseNotLive) || !errors.As(err, &lnl) {
		t.Fatalf("Commit(%v) = %v, want a *LeaseNotLiveError", tok, err)
	}
	if errors.Is(err, leasefence.ErrStaleFence) || errors.Is(err, leasefence.ErrRefusalNotLogged) {
		t.Fatalf("Commit(%v) = %v: a lease refusal, logged, is neither a stale fence nor unlogged", tok, err)
	}
	if lnl.Seq != seq || lnl.Holder != tok.Holder || lnl.Fence != tok.Fence || lnl.FloorFence > tok.Fence {
		t.Fatalf("refusal %+v, want Seq %d of %v under a floor that admits it", lnl.Rejection, seq, tok)
	}
}

// TestCurrentLeaseRefusesAStaleHolderBeforeTheNewHoldersFirstWrite: a
// holder whose lease expired writes before the new holder has written. A
// floor-only gate admits that write (the fence is the floor's own); the
// gate made WithCurrentLease refuses it, logs it, and leaves the floor
// and the orders as they were. The new holder then writes through it, and
// the stale holder is refused by the floor as usual.
func TestCurrentLeaseRefusesAStaleHolderBeforeTheNewHoldersFirstWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db, coord := leaseSetup(t, d, sqllease.Options{TTL: leaseTTL})
		leased := newGate(t, db, "orders", sqlgate.WithCurrentLease(sqllease.DefaultTable))
		floorOnly := newGate(t, d.handle(t), "orders", sqlgate.WithTablePrefix("floor_only_"))

		a := sqltest.MustAcquire(t, coord, "worker-a", "orders")
		for _, g := range []*sqlgate.Gate{leased, floorOnly} {
			if err := g.Commit(t.Context(), a, insertOrder(a, "a, live")); err != nil {
				t.Fatalf("worker-a's write under its live lease: %v", err)
			}
		}
		time.Sleep(leaseTTL + 20*time.Millisecond) // worker-a stalls past its lease
		b := sqltest.MustAcquire(t, coord, "worker-b", "orders")

		err := leased.Commit(t.Context(), a, insertOrder(a, "a, late"))
		wantLeaseNotLive(t, err, a, 1)
		checkFloor(t, leased, a)
		checkLog(t, leased, []leasefence.Rejection{{Seq: 1, Resource: "orders", Holder: a.Holder, Fence: a.Fence, FloorHolder: a.Holder, FloorFence: a.Fence}})
		if err := floorOnly.Commit(t.Context(), a, insertOrder(a, "a, late, floor only")); err != nil {
			t.Fatalf("the floor-only gate refused worker-a's late write (%v): the window the lease check closes is not there", err)
		}

		if err := leased.Commit(t.Context(), b, insertOrder(b, "b")); err != nil {
			t.Fatalf("worker-b's first write: %v", err)
		}
		if err := leased.Commit(t.Context(), a, insertOrder(a, "a, later")); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("worker-a after worker-b's write = %v, want the floor's ErrStaleFence", err)
		}
		want := []order{
			{"worker-a", a.Fence, "a, live"}, {"worker-a", a.Fence, "a, live"},
			{"worker-a", a.Fence, "a, late, floor only"}, {"worker-b", b.Fence, "b"},
		}
		if got := readOrders(t, db, "orders"); !slices.Equal(got, want) {
			t.Fatalf("orders = %+v, want %+v", got, want)
		}
	})
}

// TestCurrentLeaseEndsWithEveryEnd: a released lease, a superseded one,
// a forged holder and a renewed lease, at a gate made WithCurrentLease.
func TestCurrentLeaseEndsWithEveryEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db, coord := leaseSetup(t, d, sqllease.Options{Table: "lf_locks", TTL: time.Second})
		gate := newGate(t, db, "r", sqlgate.WithCurrentLease("lf_locks"))

		a := sqltest.MustAcquire(t, coord, "worker-a", "r")
		if out, err := coord.Release(t.Context(), a); err != nil || !out.OK {
			t.Fatalf("Release = %+v, %v", out, err)
		}
		wantLeaseNotLive(t, gate.Commit(t.Context(), a, insertOrder(a, "released")), a, 1)

		b := sqltest.MustAcquire(t, coord, "worker-b", "r")
		forged := b
		forged.Holder = "worker-c"
		wantLeaseNotLive(t, gate.Commit(t.Context(), forged, insertOrder(forged, "forged")), forged, 2)
		wantLeaseNotLive(t, gate.Commit(t.Context(), a, insertOrder(a, "superseded")), a, 3)

		for range 3 { // renewed past its first TTL, the lease is still live
			time.Sleep(400 * time.Millisecond)
			if out, err := coord.Renew(t.Context(), leasefence.RenewRequest{RequestID: "renew-" + b.String(), Token: b}); err != nil || !out.OK {
				t.Fatalf("Renew = %+v, %v", out, err)
			}
		}
		if err := gate.Commit(t.Context(), b, insertOrder(b, "renewed")); err != nil {
			t.Fatalf("a renewed lease's write: %v", err)
		}
		if got := readOrders(t, db, "r"); len(got) != 1 || got[0].Item != "renewed" {
			t.Fatalf("orders = %+v, want only the renewed lease's", got)
		}
	})
}

func TestCurrentLeaseNeedsTheTable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db := d.handle(t)
		if g, err := sqlgate.New(t.Context(), db, "r", sqlgate.WithCurrentLease("no_such_leases")); !errors.Is(err, sqlgate.ErrSchema) {
			t.Fatalf("New WithCurrentLease of a missing table = %v, %v; want ErrSchema", g, err)
		}
		for _, bad := range []string{"", "a.b.c", "leases; DROP TABLE x", "1x"} {
			if _, err := sqlgate.New(t.Context(), db, "r", sqlgate.WithCurrentLease(bad)); !errors.Is(err, leasefence.ErrInvalidRequest) {
				t.Errorf("WithCurrentLease(%q) = %v, want ErrInvalidRequest", bad, err)
			}
		}
	})
}

// TestCurrentLeaseHoldsOffTheNextAcquireUntilTheWriteEnds: a write admitted
// under a live lease runs on past the lease's end; an acquire of the
// resource meanwhile waits for the write's transaction (PostgreSQL: the
// lease row held FOR SHARE; SQLite: the write lock), so the write is
// ordered before the next grant, never after it.
func TestCurrentLeaseHoldsOffTheNextAcquireUntilTheWriteEnds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db, coord := leaseSetup(t, d, sqllease.Options{TTL: leaseTTL})
		gate := newGate(t, db, "orders", sqlgate.WithCurrentLease(sqllease.DefaultTable))
		a := sqltest.MustAcquire(t, coord, "worker-a", "orders")
		cl, err := leasefence.NewLockClient("worker-b", leaseTTL, 0)
		if err != nil {
			t.Fatal(err)
		}
		req, err := cl.BeginAcquire("orders")
		if err != nil {
			t.Fatal(err)
		}
		type answer struct {
			out leasefence.AcquireOutcome
			err error
		}
		answered := make(chan answer, 1)
		err = gate.Commit(t.Context(), a, func(ctx context.Context, tx *sql.Tx) error {
			time.Sleep(leaseTTL + 20*time.Millisecond) // the lease ends while the write runs
			go func() {
				out, err := coord.Acquire(t.Context(), req)
				answered <- answer{out, err}
			}()
			select {
			case b := <-answered:
				return fmt.Errorf("worker-b answered %+v, %v while worker-a's admitted write was still running", b.out, b.err)
			case <-time.After(200 * time.Millisecond):
			}
			return insertOrder(a, "a, long write")(ctx, tx)
		})
		if err != nil {
			t.Fatal(err)
		}
		if b := <-answered; b.err != nil || !b.out.OK || b.out.Grant.Token.Fence <= a.Fence {
			t.Fatalf("worker-b's acquire after worker-a's write = %+v, %v; want a grant above fence %d", b.out, b.err, a.Fence)
		}
	})
}
