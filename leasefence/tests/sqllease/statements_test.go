package sqllease_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// TestAFreshGrantIsNineStatements: on PostgreSQL each statement is a round
// trip, most of what an acquire costs. A grant of a free resource is BEGIN,
// the row made if absent, the row locked, the clock and the request id read
// together, the old request ids pruned, the fence minted, the lease
// written, the request id remembered, COMMIT; a release is one UPDATE.
func TestAFreshGrantIsNineStatements(t *testing.T) {
	db, counter := sqltest.NewPostgres(t).OpenCounted(t)
	coord := newCoordinator(t, db, sqllease.Options{TTL: time.Minute})
	release(t, coord, sqltest.MustAcquire(t, coord, "worker-a", "warm-up")) // and the schema's check, once

	before := counter.N()
	tok := sqltest.MustAcquire(t, coord, "worker-a", "slot")
	acquired := counter.N()
	release(t, coord, tok)
	if got := acquired - before; got != 9 {
		t.Errorf("a fresh grant sent %d statements, want 9", got)
	}
	if got := counter.N() - acquired; got != 1 {
		t.Errorf("a release sent %d statements, want 1", got)
	}
}

func release(t *testing.T, coord *sqllease.Coordinator, tok leasefence.Token) {
	t.Helper()
	if out, err := coord.Release(t.Context(), tok); err != nil || !out.OK {
		t.Fatalf("Release(%v) = %+v, %v", tok, out, err)
	}
}

// TestAnAcquireReadsTheClockOnceTheRowIsLocked: an acquire that waits for
// the resource's row (here held FOR SHARE, as a gate made WithCurrentLease
// holds it while a write runs) judges the lease by the clock after the wait.
// The lease expires during the wait, so the acquire is granted; an acquire
// that read the clock before its wait would answer "held" by a lease that
// had ended.
func TestAnAcquireReadsTheClockOnceTheRowIsLocked(t *testing.T) {
	d := openPostgres(t)
	db := d.handle(t)
	coord := newCoordinator(t, db, sqllease.Options{TTL: testTTL})
	old := sqltest.MustAcquire(t, coord, "worker-a", "slot")
	expired := time.Now().Add(testTTL + 50*time.Millisecond) // after the lease's end on any clock

	blocker, err := d.handle(t).BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback() }()
	if _, err := blocker.ExecContext(t.Context(), `SELECT 1 FROM `+sqllease.DefaultTable+` WHERE resource = 'slot' FOR SHARE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		out leasefence.AcquireOutcome
		err error
	}
	done := make(chan answer, 1)
	go func() {
		c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("b"), Holder: "worker-b"})
		if err != nil {
			done <- answer{err: err}
			return
		}
		req, err := c.BeginAcquire("slot")
		if err != nil {
			done <- answer{err: err}
			return
		}
		out, err := coord.Acquire(t.Context(), req)
		done <- answer{out, err}
	}()
	time.Sleep(time.Until(expired))
	if err := blocker.Commit(); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || !a.out.OK {
		t.Fatalf("Acquire after %v's lease ended during its wait = %+v, %v; want a grant", old, a.out, a.err)
	}
	if a.out.Grant.Token.Fence <= old.Fence {
		t.Fatalf("grant %v after %v: the fence did not rise", a.out.Grant.Token, old)
	}
	if a.out.Grant.Token.Holder != "worker-b" {
		t.Fatalf("grant %v, want worker-b's", a.out.Grant.Token)
	}
}
