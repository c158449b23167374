package redislocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/redislocks"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

func openRedlock(t *testing.T) (*realtime.Contender, *redislocks.Redlock) {
	t.Helper()
	c, rl, err := redislocks.OpenRedlock(t.Context(), t.TempDir())
	closeAfter(t, c, err)
	return c, rl
}

// closeAfter skips t when no redis-server is installed, fails it on any
// other error, and closes c at its end.
func closeAfter(t *testing.T, c *realtime.Contender, err error) {
	t.Helper()
	if errors.Is(err, redisdeploy.ErrNotInstalled) {
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
}

// Redlock runs on three servers of its own, each on a port of its own,
// and holds a lock with one of them paused: a majority suffices. With two
// paused it holds none, and says so with an error that is not ErrHeld.
func TestRedlockQuorum(t *testing.T) {
	c, rl := openRedlock(t)
	ports := map[int]bool{}
	for i := range registry.RedlockServers {
		ports[rl.Server(i).Port] = true
	}
	if len(ports) != registry.RedlockServers {
		t.Fatalf("redlock's servers listen on %d ports, want %d", len(ports), registry.RedlockServers)
	}
	l, err := c.New(t.Context(), registry.Redlock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ttl = 2 * time.Second
	if err := rl.Server(0).Pause(); err != nil {
		t.Fatal(err)
	}
	a, err := l.Acquire(ctx, "r", "agent-1", ttl)
	if err != nil {
		t.Fatalf("Acquire with a majority healthy: %v", err)
	}
	if left := time.Until(a.Deadline()); left <= 0 || left > ttl {
		t.Errorf("Until() %v from now: want within the TTL", left)
	}
	if _, err := l.Acquire(ctx, "r", "agent-2", ttl); !errors.Is(err, realtime.ErrHeld) {
		t.Fatalf("a second Acquire with a majority healthy: %v, want ErrHeld", err)
	}
	if err := rl.Server(1).Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "s", "agent-2", ttl); err == nil || errors.Is(err, realtime.ErrHeld) {
		t.Errorf("Acquire with two of three servers paused: %v, want an error that is not ErrHeld", err)
	}
	for i := range 2 {
		if err := rl.Server(i).Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release(ctx); err != nil {
		t.Errorf("Release with every server back: %v", err)
	}
	if b, err := l.Acquire(ctx, "r", "agent-2", ttl); err != nil {
		t.Errorf("Acquire after the Release: %v", err)
	} else if err := b.Release(ctx); err != nil {
		t.Error(err)
	}
}

// A restart of a server that kept nothing forgets its keys: with another
// server's key gone as well, the lock is free while its holder believes
// it holds it. Redlock's own caveat (antirez, "Is Redlock safe?", 2016:
// persistence or a delayed restart), shown on the real servers.
func TestRedlockRestartEmptyForgets(t *testing.T) {
	c, rl := openRedlock(t)
	l, err := c.New(t.Context(), registry.Redlock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ttl = 10 * time.Second
	a, err := l.Acquire(ctx, "r", "agent-1", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Restart(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "r", "agent-2", ttl); !errors.Is(err, realtime.ErrHeld) {
		t.Fatalf("Acquire after a restart on the append-only file: %v, want ErrHeld", err)
	}
	// The key survives one server's restart on no data: two still hold it.
	if err := c.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "r", "agent-2", ttl); !errors.Is(err, realtime.ErrHeld) {
		t.Fatalf("Acquire after one restart on no data: %v, want ErrHeld", err)
	}
	if err := rl.Restart(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, "r", "agent-2", ttl)
	if err != nil {
		t.Fatalf("Acquire after two servers restarted on no data: %v, want the lock granted again", err)
	}
	if time.Now().After(a.Deadline()) {
		t.Fatal("the first lease ran out: the test proves nothing")
	}
	b.Release(ctx)
	if err := rl.Restart(ctx, 3, true); err == nil {
		t.Error("a restart of a fourth server")
	}
}

// A scenario's restarts restart redis-1 through the run: the history
// records each, and the lock keeps granting, on a majority.
func TestRedlockScenarioRestart(t *testing.T) {
	c, rl := openRedlock(t)
	sc, ok := spec.Builtin("gap")
	if !ok {
		t.Fatal("no built-in gap")
	}
	sc.Duration = 3 * time.Second
	sc.Restarts = []spec.Restart{{At: time.Second}, {At: 2 * time.Second, Persist: true}}
	var restarts, grants, errs int
	r, err := realtime.New(sc, realtime.Options{Backend: c, Modes: []history.Mode{registry.Redlock},
		Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) {
			switch e.Kind {
			case history.CoordinatorRestarted:
				restarts++
			case history.Granted:
				grants++
			case history.LibraryError:
				errs++
				t.Errorf("library error: %s", e.Detail)
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if restarts != 2 || grants == 0 {
		t.Errorf("%d restarts, %d grants: want 2 and some", restarts, grants)
	}
	if !rl.Server(0).Running() {
		t.Error("redis-1 is not running after the run's restarts")
	}
}
