package sqllease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqllease"
)

// cancellingGate fails Admit by ending the ctx Lock was given, as a caller
// whose deadline passes while a gate admits the new token.
type cancellingGate struct {
	leasefence.Gate // nil: Hold calls only Resource and Admit
	resource        string
	cancel          context.CancelFunc
}

func (g cancellingGate) Resource() string { return g.resource }

func (g cancellingGate) Admit(ctx context.Context, _ leasefence.Token) error {
	g.cancel()
	return ctx.Err()
}

// TestLockLeavesNothingHeldWhenItsContextEnds: Lock is granted, then its
// ctx ends while a gate admits the token; Lock fails, and the release of
// the grant still reaches the database: the resource is free at once,
// not after its TTL.
func TestLockLeavesNothingHeldWhenItsContextEnds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db := d.handle(t)
		coord := newCoordinator(t, db, sqllease.Options{TTL: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s, err := sqllease.Lock(ctx, db, "slot", sqllease.LockOptions{TTL: time.Minute, Holder: "worker-a",
			Hold: leasefence.HoldOptions{AdmitAt: []leasefence.Gate{cancellingGate{resource: "slot", cancel: cancel}}}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock with a ctx that ends at the gate = %v, %v; want context.Canceled", s, err)
		}
		if tok, held, err := coord.Holder(t.Context(), "slot"); err != nil || held {
			t.Fatalf("Holder after the failed Lock = %v, %v, %v; want nobody: the clean-up did not reach the database", tok, held, err)
		}
	})
}

// TestLockWaitsForTheHolder: a second Lock waits while the first session
// holds the resource and gets it, with a higher fence, once released.
func TestLockWaitsForTheHolder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		db := d.handle(t)
		newCoordinator(t, db, sqllease.Options{TTL: time.Second})
		first, err := sqllease.Lock(t.Context(), db, "slot", sqllease.LockOptions{Holder: "worker-a", TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if _, err := sqllease.Lock(short, d.handle(t), "slot", sqllease.LockOptions{Holder: "worker-b"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a held resource = %v, want DeadlineExceeded", err)
		}
		if out, err := first.Release(t.Context()); err != nil || !out.OK {
			t.Fatalf("Release = %+v, %v", out, err)
		}
		second, err := sqllease.Lock(t.Context(), d.handle(t), "slot", sqllease.LockOptions{Holder: "worker-b"})
		if err != nil {
			t.Fatal(err)
		}
		defer second.Release(context.Background())
		if second.Token().Fence <= first.Token().Fence {
			t.Fatalf("fence %d after %d", second.Token().Fence, first.Token().Fence)
		}
	})
}
