package zklock_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/realtime/zklock"
	"github.com/leasefence/lab/registry"
)

// open starts contender name's ZooKeeper, or skips the test when none is
// installed.
func open(t *testing.T, fenced bool) *realtime.Contender {
	t.Helper()
	c, err := zklock.Open(t.Context(), t.TempDir(), fenced)
	if errors.Is(err, zklock.ErrNotInstalled) {
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
	return l
}

// acquire is one Acquire that waits at most wait for the lock.
func acquire(t *testing.T, l realtime.Lock, holder string, wait, ttl time.Duration) (realtime.Lease, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	return l.Acquire(ctx, "r", holder, ttl)
}

func TestLockAgainstZooKeeper(t *testing.T) {
	ctx := t.Context()
	c := open(t, true)
	if c.Info.Name != registry.ZooKeeperFenced || !c.Info.Fence || c.Info.Generations != realtime.GenerationsFence {
		t.Errorf("contender %+v", c.Info)
	}
	l := lock(t, c)
	const ttl = time.Second
	a, err := acquire(t, l, "agent-1", 5*time.Second, ttl)
	if err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	if _, err := acquire(t, l, "agent-2", 300*time.Millisecond, ttl); !errors.Is(err, realtime.ErrHeld) {
		t.Fatalf("a second Acquire of a held lock: %v, want ErrHeld", err)
	}
	if waited := time.Since(begun); waited < 300*time.Millisecond {
		t.Errorf("the second Acquire answered after %v: zk.Lock waits for the lock", waited)
	}
	fa, ok := a.Fence()
	if !ok || fa == 0 || a.(realtime.Ordered).Generation() != fa {
		t.Fatalf("fence %d %v, generation %d: want the czxid twice", fa, ok, a.(realtime.Ordered).Generation())
	}
	if left := time.Until(a.Deadline()); left <= 0 || left > ttl {
		t.Errorf("deadline %v from now: want within the session timeout", left)
	}
	// The library keeps the session alive: unrenewed past its timeout,
	// the lock is still held.
	time.Sleep(2 * ttl)
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("Renew of a live lease: %v", err)
	}
	if left := time.Until(a.Deadline()); left <= 0 || left > ttl {
		t.Errorf("deadline %v from now after Renew: want within the session timeout", left)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err == nil {
		t.Error("a second Release succeeded")
	}
	if err := a.Renew(ctx); err == nil {
		t.Error("Renew of a released lease succeeded")
	}
	b, err := acquire(t, l, "agent-2", 5*time.Second, ttl)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if fb, _ := b.Fence(); fb <= fa {
		t.Errorf("fences %d then %d: the czxids must grow", fa, fb)
	}
	if _, err := acquire(t, l, "agent-1", time.Second, 1500*time.Microsecond); !errors.Is(err, zklock.ErrTTL) {
		t.Errorf("a ttl of 1.5ms: %v, want ErrTTL", err)
	}
}

// A holder cut off from ZooKeeper (its process paused, its network gone)
// loses its session: the server expires it and deletes the lock znode,
// and the next waiter's zk.Lock takes the lock. The lease's deadline
// never outlives the server's expiry: the new grant comes after it, so
// the lab charges the lock with no mutual-exclusion violation.
func TestExpiredSession(t *testing.T) {
	ctx := t.Context()
	c := open(t, false)
	if c.Info.Fence || c.Info.Generations != realtime.GenerationsServer {
		t.Errorf("contender %+v: want no fence, the server's order", c.Info)
	}
	p := runtest.Proxy(t, addr(t, c))
	cut := &zklock.Lock{Addr: p.Addr, Root: "/expiry"}
	t.Cleanup(func() { cut.Close() })
	direct := &zklock.Lock{Addr: addr(t, c), Root: "/expiry"}
	t.Cleanup(func() { direct.Close() })
	const ttl = time.Second
	a, err := acquire(t, cut, "agent-1", 5*time.Second, ttl)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2)
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("Renew of a live lease: %v", err)
	}
	deadline := a.Deadline()
	p.Cut()
	// The new holder's session outlives the rest of the test (up to 3s
	// of a's renewal below) by far: with a 1s session, a loaded machine's
	// missed pings expired it, and its Release found the connection
	// closed.
	b, err := acquire(t, direct, "agent-2", 10*ttl, 10*ttl)
	granted := time.Now()
	if err != nil {
		t.Fatalf("the lock of an expired session was not taken over: %v", err)
	}
	if !granted.After(deadline) {
		t.Errorf("granted again %v before the first lease's deadline: the deadline outlived the server's expiry", deadline.Sub(granted))
	}
	if b.(realtime.Ordered).Generation() <= a.(realtime.Ordered).Generation() {
		t.Errorf("generations %d then %d: the czxids must grow", a.(realtime.Ordered).Generation(), b.(realtime.Ordered).Generation())
	}
	rctx, cancel := context.WithTimeout(ctx, 3*ttl)
	defer cancel()
	if err := a.Renew(rctx); err == nil {
		t.Error("Renew of a lease whose session expired succeeded")
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("Release of the live lease: %v", err)
	}
}

// addr is the address of c's server, from its Share.
func addr(t *testing.T, c *realtime.Contender) string {
	t.Helper()
	var sh struct{ Addr string }
	if err := json.Unmarshal([]byte(c.Share), &sh); err != nil || sh.Addr == "" {
		t.Fatalf("share %q: %v", c.Share, err)
	}
	return sh.Addr
}

// On a server it is given ($LEASEFENCE_ZK_ADDR, as scripts/zookeeper.sh
// starts one), a contender keeps its znodes under a root of its own and
// deletes them when it closes; an agent's process attaches to the same.
func TestGivenServer(t *testing.T) {
	t.Setenv(zklock.EnvAddr, "")
	server := open(t, false)
	t.Setenv(zklock.EnvAddr, addr(t, server))
	c, err := zklock.Open(t.Context(), t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	attached, err := zklock.Attach(c.Share, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*realtime.Contender{c, attached} {
		a, err := acquire(t, lock(t, c), "agent-1", 5*time.Second, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := a.Fence(); !ok || f == 0 {
			t.Errorf("fence %d %v", f, ok)
		}
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := acquire(t, lock(t, c), "agent-1", time.Second, 100*time.Millisecond); !errors.Is(err, zklock.ErrTTL) {
		t.Errorf("a ttl below the server's least session timeout: %v, want ErrTTL", err)
	}
	if err := errors.Join(attached.Close(), c.Close()); err != nil {
		t.Fatal(err)
	}
	conn, _, err := zk.Connect([]string{addr(t, server)}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roots, _, err := conn.Children("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roots {
		if strings.HasPrefix(r, "leasefence-") {
			t.Errorf("the run's root /%s is left on the server", r)
		}
	}
	t.Setenv(zklock.EnvAddr, "127.0.0.1:1")
	if _, err := zklock.Open(t.Context(), t.TempDir(), false); err == nil || !strings.Contains(err.Error(), "scripts/zookeeper.sh start") {
		t.Errorf("a given server that does not answer: %v, want an error naming scripts/zookeeper.sh", err)
	}
}
