package sqlgate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// TestPostgresCommitStatements: on PostgreSQL each statement is a round
// trip, most of what a gated commit costs beyond the write. An admitted
// commit is BEGIN, the floor row locked and read, the write, COMMIT; the
// first write of a new lease is BEGIN, the conditional UPDATE that checks,
// raises and locks the floor row, the write, COMMIT. A refusal by the
// floor is BEGIN, the lock, the log's sequence number, the log entry,
// COMMIT. WithCurrentLease reads the lease row in the statement that
// locks or raises the floor row, so the lease check adds no statement; a
// lease refusal is logged in the transaction that judged it when nothing
// was raised in it, and otherwise after a ROLLBACK, in a transaction of
// its own.
func TestPostgresCommitStatements(t *testing.T) {
	pg := sqltest.NewPostgres(t)
	db, counter := pg.OpenCounted(t)
	_, coord := leaseSetup(t, &postgresDB{pg}, sqllease.Options{TTL: time.Minute})
	release := func(t *testing.T, tok leasefence.Token) {
		t.Helper()
		if out, err := coord.Release(t.Context(), tok); err != nil || !out.OK {
			t.Fatalf("Release(%v) = %+v, %v", tok, out, err)
		}
	}

	for _, tc := range []struct {
		name  string
		lease bool
	}{{"floor only", false}, {"WithCurrentLease", true}} {
		t.Run(tc.name, func(t *testing.T) {
			resource := "r-" + tc.name
			var opts []sqlgate.Option
			if tc.lease {
				opts = append(opts, sqlgate.WithCurrentLease(sqllease.DefaultTable))
			}
			gate := newGate(t, db, resource, opts...)
			count := func(what string, want int64, tok leasefence.Token) error {
				t.Helper()
				before := counter.N()
				err := gate.Commit(t.Context(), tok, insertOrder(tok, what))
				if got := counter.N() - before; got != want {
					t.Errorf("%s: %d statements, want %d", what, got, want)
				}
				return err
			}
			admitted := func(what string, tok leasefence.Token) {
				t.Helper()
				if err := count(what, 4, tok); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			a := sqltest.MustAcquire(t, coord, "worker-a", resource)
			admitted("a's first write (the floor rises)", a)
			admitted("a's second write", a)
			release(t, a)
			b := sqltest.MustAcquire(t, coord, "worker-b", resource)
			admitted("b's first write (the floor rises from a's)", b)
			admitted("b's second write", b)
			if err := count("a's write after b's", 5, a); !errors.Is(err, leasefence.ErrStaleFence) {
				t.Fatalf("a's write after b's = %v, want ErrStaleFence", err)
			}
			if !tc.lease {
				return
			}
			release(t, b)
			wantLeaseNotLive(t, count("b's write after its release", 5, b), b, 2)
			forged := leasefence.Token{Resource: resource, Holder: "worker-c", Fence: b.Fence + 1}
			wantLeaseNotLive(t, count("a write above the floor with no lease", 7, forged), forged, 3)
			checkFloor(t, gate, b)
		})
	}
}

// TestPostgresLeaseJudgedAfterTheFloorsWait: a commit made WithCurrentLease
// that waits for the floor row (held by another gate's write on the same
// resource and tables) judges the lease as it is once the wait ends, not as
// it was when the commit's statement began: a lease that expired during the
// wait is refused, and one renewed during the wait, whose first term ended
// during it, is admitted. A statement that judged the lease before taking
// the floor row's lock admits the first; one that judged the lease row
// version its snapshot saw (from before the renewal) refuses the second.
// Both of the gate's first statements are held to it: the lock, sent by a
// gate that has seen the floor, and the conditional UPDATE, sent by a gate
// new to it.
func TestPostgresLeaseJudgedAfterTheFloorsWait(t *testing.T) {
	const ttl = 2 * time.Second
	for i, tc := range []struct {
		name        string
		renew, seen bool
	}{
		{"expired during the wait, floor seen", false, true},
		{"renewed during the wait, floor seen", true, true},
		{"expired during the wait, floor new to the gate", false, false},
		{"renewed during the wait, floor new to the gate", true, false},
	} {
		prefix := fmt.Sprintf("waits%d_", i) // tells the subtest's waits from the others'
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := openPostgres(t)
			db, coord := leaseSetup(t, d, sqllease.Options{TTL: ttl})
			blocking := newGate(t, d.handle(t), "orders", sqlgate.WithTablePrefix(prefix))
			leased := newGate(t, db, "orders", sqlgate.WithTablePrefix(prefix), sqlgate.WithCurrentLease(sqllease.DefaultTable))
			sent := time.Now()
			a := sqltest.MustAcquire(t, coord, "worker-a", "orders")
			// The database dates the lease's first term while the acquire
			// runs, so on this host's clock it ends after notBefore and by
			// endedBy.
			notBefore, endedBy := sent.Add(ttl), time.Now().Add(ttl)
			// The floor is a's before the wait, and the gate holding the floor
			// row has seen it, so its write leaves the row as it is:
			// PostgreSQL evaluates again a statement waiting on a row that
			// changed, which would hide a lease judged before the wait.
			admits := []*sqlgate.Gate{blocking}
			if tc.seen {
				admits = append(admits, leased)
			}
			for _, g := range admits {
				if err := g.Admit(t.Context(), a); err != nil {
					t.Fatal(err)
				}
			}

			holding, release := make(chan struct{}), make(chan struct{})
			var releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			defer free() // on a skip or a failure too, so that the floor row's holder ends
			blocked := make(chan error, 1)
			go func() {
				blocked <- blocking.Commit(t.Context(), a, func(ctx context.Context, tx *sql.Tx) error {
					close(holding)
					<-release
					return insertOrder(a, "the floor row's holder")(ctx, tx)
				})
			}()
			<-holding
			waited := make(chan error, 1)
			go func() { waited <- leased.Commit(t.Context(), a, insertOrder(a, "waited")) }()
			waitForLockWait(t, db, prefix+"floor")
			late := notBefore // a wait begun after the lease's end tells nothing apart
			if tc.renew {
				late = sent.Add(ttl / 2) // a renewal must have time to land in the first term
			}
			if time.Now().After(late) {
				t.Skip("the commit reached the floor row's wait too late for the lease's end to fall in it (machine too loaded)")
			}
			if tc.renew {
				time.Sleep(time.Until(sent.Add(ttl / 2)))
				// The renewal lands in the first term (or is refused), and the
				// renewed term ends half a TTL after the wait does. A commit
				// that locked the lease row before the floor's wait would hold
				// the renewal off until after it: the renewal gives up at the
				// first term's end instead of waiting for a write that waits
				// for it.
				ctx, cancel := context.WithDeadline(t.Context(), notBefore)
				defer cancel()
				req := leasefence.RenewRequest{RequestID: "renew-" + a.String(), Token: a}
				if out, err := coord.Renew(ctx, req); err != nil || !out.OK {
					t.Fatalf("Renew during the wait = %+v, %v", out, err)
				}
			}
			time.Sleep(time.Until(endedBy.Add(50 * time.Millisecond)))
			free()
			if err := <-blocked; err != nil {
				t.Fatalf("the floor row's holder: %v", err)
			}
			err := <-waited
			if tc.renew {
				if err != nil {
					t.Fatalf("a commit under a lease renewed during its wait = %v, want admitted", err)
				}
				return
			}
			wantLeaseNotLive(t, err, a, 1)
		})
	}
}
