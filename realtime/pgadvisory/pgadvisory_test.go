package pgadvisory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/pgadvisory"
	"github.com/leasefence/lab/realtime/pgbackend"
	"github.com/leasefence/lab/registry"
)

// open opens the contender on the PostgreSQL $LEASEFENCE_PG_URL names, or
// skips the test when none is named.
func open(t *testing.T) *realtime.Contender {
	t.Helper()
	c, err := pgadvisory.Open(t.Context())
	if errors.Is(err, pgbackend.ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func lock(t *testing.T, c *realtime.Contender) realtime.Lock {
	t.Helper()
	l, err := c.New(t.Context(), c.Info.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.(*pgadvisory.Lock).Close() })
	return l
}

func TestLockAgainstPostgreSQL(t *testing.T) {
	ctx := t.Context()
	c := open(t)
	if c.Info.Name != registry.PgAdvisory || c.Info.Fence || c.Info.Generations != realtime.GenerationsObserved {
		t.Errorf("contender %+v", c.Info)
	}
	l := lock(t, c)
	a, err := l.Acquire(ctx, "r", "agent-1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "r", "agent-2", time.Second); !errors.Is(err, realtime.ErrHeld) {
		t.Fatalf("a second Acquire of a held lock: %v, want ErrHeld", err)
	}
	other, err := l.Acquire(ctx, "other", "agent-2", time.Second)
	if err != nil {
		t.Fatalf("another resource's lock: %v", err)
	}
	if _, ok := a.Fence(); ok {
		t.Error("an advisory lock has no fence")
	}
	if left := time.Until(a.Deadline()); left < pgadvisory.NoDeadline-time.Minute {
		t.Errorf("deadline %v ahead: the lock has no TTL", left)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("Renew of a held lock: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := a.Release(ctx); !errors.Is(err, realtime.ErrNotHeld) {
		t.Errorf("a second Release: %v, want ErrNotHeld", err)
	}
	b, err := l.Acquire(ctx, "r", "agent-2", time.Second)
	if err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	for _, le := range []realtime.Lease{b, other} {
		if err := le.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// A restart ends the lock's sessions: PostgreSQL drops their locks and
// tells the holders nothing; the next Acquire is granted, and only the
// old holder's next call on its connection finds the lock gone.
func TestRestartEndsTheSessionsAndTheirLocks(t *testing.T) {
	ctx := t.Context()
	c := open(t)
	if !c.RestartEndsLeases {
		t.Error("the contender does not say that its restarts end its leases")
	}
	l := lock(t, c)
	a, err := l.Acquire(ctx, "r", "agent-1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, false); !errors.Is(err, pgadvisory.ErrPersist) {
		t.Errorf("a restart that loses data: %v, want ErrPersist", err)
	}
	if err := c.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, "r", "agent-2", time.Second)
	if err != nil {
		t.Fatalf("Acquire after the old holder's session ended: %v", err)
	}
	if time.Until(a.Deadline()) <= 0 {
		t.Error("the old holder was told its lock ended: the library tells it nothing")
	}
	if err := a.Renew(ctx); !errors.Is(err, realtime.ErrNotHeld) {
		t.Errorf("the old holder's Renew: %v, want ErrNotHeld", err)
	}
	if err := a.Release(ctx); !errors.Is(err, realtime.ErrNotHeld) {
		t.Errorf("the old holder's Release: %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("the new holder's Release: %v", err)
	}
}

// An agent in a process of its own attaches to the run's locks: the same
// keys, the same sessions' name.
func TestAttachSharesTheLocks(t *testing.T) {
	ctx := t.Context()
	c := open(t)
	a, err := lock(t, c).Acquire(ctx, "r", "agent-1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgadvisory.Attach(c.Share)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if _, err := lock(t, other).Acquire(ctx, "r", "agent-2", time.Second); !errors.Is(err, realtime.ErrHeld) {
		t.Errorf("another process's Acquire of the held lock: %v, want ErrHeld", err)
	}
	if err := c.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx); !errors.Is(err, realtime.ErrNotHeld) {
		t.Errorf("Renew after the restart: %v, want ErrNotHeld", err)
	}
}
