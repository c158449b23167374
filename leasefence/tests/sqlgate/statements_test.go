package sqlgate_test

import (
	"context"
	"database/sql"
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
// floor's UPDATE is added only when the floor rises. WithCurrentLease
// reads the lease row in the statement that locks the floor row, so the
// lease check adds no statement, and a lease refusal is logged in the
// transaction that judged it (nothing was raised in it): BEGIN, the floor
// and lease rows, the log's sequence number, the log entry, COMMIT.
func TestPostgresCommitStatements(t *testing.T) {
	pg := sqltest.NewPostgres(t)
	db, counter := pg.OpenCounted(t)
	_, coord := leaseSetup(t, &postgresDB{pg}, sqllease.Options{TTL: time.Minute})

	for _, tc := range []struct {
		name string
		opts []sqlgate.Option
	}{
		{"floor only", nil},
		{"WithCurrentLease", []sqlgate.Option{sqlgate.WithCurrentLease(sqllease.DefaultTable)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource := "r-" + tc.name
			gate := newGate(t, db, resource, tc.opts...)
			a := sqltest.MustAcquire(t, coord, "worker-a", resource)
			for _, step := range []struct {
				what string
				want int64
			}{
				{"the first write of a lease (the floor rises)", 5},
				{"a write under the floor's own token", 4},
			} {
				before := counter.N()
				if err := gate.Commit(t.Context(), a, insertOrder(a, step.what)); err != nil {
					t.Fatalf("%s: %v", step.what, err)
				}
				if got := counter.N() - before; got != step.want {
					t.Errorf("%s: %d statements, want %d", step.what, got, step.want)
				}
			}
			if len(tc.opts) == 0 {
				return
			}
			if out, err := coord.Release(t.Context(), a); err != nil || !out.OK {
				t.Fatalf("Release = %+v, %v", out, err)
			}
			before := counter.N()
			wantLeaseNotLive(t, gate.Commit(t.Context(), a, insertOrder(a, "released")), a, 1)
			if got := counter.N() - before; got != 5 {
				t.Errorf("a lease refusal: %d statements, want 5", got)
			}
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
func TestPostgresLeaseJudgedAfterTheFloorsWait(t *testing.T) {
	const ttl = 2 * time.Second
	for _, tc := range []struct {
		name  string
		renew bool
	}{
		{"expired during the wait", false},
		{"renewed during the wait", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openPostgres(t)
			db, coord := leaseSetup(t, d, sqllease.Options{TTL: ttl})
			blocking := newGate(t, d.handle(t), "orders", sqlgate.WithTablePrefix("waits_"))
			leased := newGate(t, db, "orders", sqlgate.WithTablePrefix("waits_"), sqlgate.WithCurrentLease(sqllease.DefaultTable))
			sent := time.Now()
			a := sqltest.MustAcquire(t, coord, "worker-a", "orders")
			ends := sent.Add(ttl) // the lease's first term ends by then, on any clock of this host
			// The floor is a's before the wait, so the write that holds the
			// floor row leaves it as it is: PostgreSQL evaluates again a
			// statement waiting on a row that changed, which would hide a
			// lease judged before the wait.
			if err := blocking.Admit(t.Context(), a); err != nil {
				t.Fatal(err)
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
			waitForLockWait(t, db, "waits_floor")
			if time.Now().After(ends) {
				t.Skip("the commit reached the floor row's wait after the lease had ended: nothing to tell apart (machine too loaded)")
			}
			if tc.renew {
				time.Sleep(time.Until(sent.Add(ttl / 2)))
				// The renewal lands in the first term (or is refused), and the
				// renewed term ends half a TTL after the wait does. A commit
				// that locked the lease row before the floor's wait would hold
				// the renewal off until after it: the renewal gives up at the
				// first term's end instead of waiting for a write that waits
				// for it.
				ctx, cancel := context.WithDeadline(t.Context(), ends)
				defer cancel()
				req := leasefence.RenewRequest{RequestID: "renew-" + a.String(), Token: a}
				if out, err := coord.Renew(ctx, req); err != nil || !out.OK {
					t.Fatalf("Renew during the wait = %+v, %v", out, err)
				}
			}
			time.Sleep(time.Until(ends.Add(50 * time.Millisecond)))
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
