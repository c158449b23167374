package redisdeploy_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
)

// start starts a deployment for t, closed in t.Cleanup; it skips t when
// redis-server is not installed.
// start starts a deployment of the test's own, on free ports and in its
// own directory: the tests that start one run in parallel, most of their
// time spent waiting for the Sentinels on the wall clock.
func start(t *testing.T, opts redisdeploy.Options) *redisdeploy.Deployment {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: apt-get install redis-server redis-sentinel (scripts/redis-sentinel.sh start installs them)")
	}
	opts.Dir = t.TempDir()
	d, err := redisdeploy.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range append(d.Servers, d.Sentinels...) {
				b, _ := os.ReadFile(s.LogFile())
				t.Logf("%s (%s) log:\n%s", s.Name, s.Addr(), b)
			}
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func failoverClient(t *testing.T, d *redisdeploy.Deployment) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(d.FailoverOptions())
	t.Cleanup(func() { c.Close() })
	return c
}

// waitWrite retries SET k v until the client reaches a primary that takes
// it, for at most 20s.
func waitWrite(t *testing.T, c *redis.Client, k, v string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := c.Set(ctx, k, v, 0).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SET %s through the Sentinels: %v", k, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartsAPrimaryReplicasAndSentinels(t *testing.T) {
	t.Parallel()
	d := start(t, redisdeploy.Options{})
	if len(d.Servers) != 3 || len(d.Sentinels) != 3 {
		t.Fatalf("%d servers and %d Sentinels; want 3 and 3", len(d.Servers), len(d.Sentinels))
	}
	p, err := d.Primary(t.Context())
	if err != nil || p != d.Servers[0] {
		t.Fatalf("Primary = %v, %v; want %s", p, err, d.Servers[0].Name)
	}
	for i, s := range d.Servers {
		role, err := s.Role(t.Context())
		want := "slave"
		if i == 0 {
			want = "master"
		}
		if err != nil || role != want {
			t.Errorf("%s: role %q, %v; want %q", s.Name, role, err, want)
		}
	}
	c := failoverClient(t, d)
	waitWrite(t, c, "k", "v")
	// WAIT: both replicas copied it.
	if n, err := c.Wait(t.Context(), 2, 5000).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2 = %d, %v", n, err)
	}
	for _, s := range d.Servers[1:] {
		r := s.Client()
		v, err := r.Get(t.Context(), "k").Result()
		r.Close()
		if err != nil || v != "v" {
			t.Errorf("%s: GET k = %q, %v", s.Name, v, err)
		}
	}
}

// A paused primary is failed over past the Sentinels' down-after time; the
// failover client follows, and the old primary, resumed, is a replica.
func TestPausedPrimaryIsFailedOver(t *testing.T) {
	t.Parallel()
	d := start(t, redisdeploy.Options{})
	c := failoverClient(t, d)
	waitWrite(t, c, "before", "1")
	old := d.Servers[0]
	if err := old.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now, err := d.WaitFailover(ctx, old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if now == old {
		t.Fatal("the paused server is still the primary")
	}
	waitWrite(t, c, "after", "1")
	if v, err := c.Get(t.Context(), "before").Result(); err != nil || v != "1" {
		t.Fatalf("GET before on the new primary = %q, %v", v, err)
	}
	if err := old.Resume(); err != nil {
		t.Fatal(err)
	}
	waitRole(t, old, "slave")
}

// A killed primary, restarted after a failover, comes back as a replica of
// the new one: the Sentinels rewrote its configuration file.
func TestKilledPrimaryComesBackAsAReplica(t *testing.T) {
	t.Parallel()
	d := start(t, redisdeploy.Options{})
	old := d.Servers[0]
	old.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := d.WaitFailover(ctx, old.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := old.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitRole(t, old, "slave")
	if p, err := d.Primary(t.Context()); err != nil || p == old {
		t.Fatalf("Primary after the restart = %v, %v; want another than %s", p, err, old.Name)
	}
}

func TestSentinelFailoverCommand(t *testing.T) {
	t.Parallel()
	d := start(t, redisdeploy.Options{Replicas: 1})
	old := d.Servers[0]
	if err := d.Failover(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now, err := d.WaitFailover(ctx, old.Addr())
	if err != nil || now != d.Servers[1] {
		t.Fatalf("WaitFailover = %v, %v; want %s", now, err, d.Servers[1].Name)
	}
}

func TestWaitFailoverSaysWhenNoneCame(t *testing.T) {
	d := start(t, redisdeploy.Options{Replicas: 1, Sentinels: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := d.WaitFailover(ctx, d.Servers[0].Addr())
	if !errors.Is(err, redisdeploy.ErrNoFailover) {
		t.Fatalf("WaitFailover with a healthy primary = %v; want ErrNoFailover", err)
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	t.Parallel()
	d := start(t, redisdeploy.Options{Replicas: 1, Sentinels: 1})
	if err := d.Servers[0].Pause(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Dir()); !os.IsNotExist(err) {
		t.Fatalf("the directory is still there after Close: %v", err)
	}
	for _, s := range append(d.Servers, d.Sentinels...) {
		if s.Running() {
			t.Errorf("%s still runs", s.Name)
		}
		c := s.Client()
		if err := c.Ping(t.Context()).Err(); err == nil {
			t.Errorf("%s still answers on %s", s.Name, s.Addr())
		}
		c.Close()
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []redisdeploy.Options{
		{Replicas: -1}, {Sentinels: -1}, {Sentinels: 3, Quorum: 4}, {MasterName: "a b"},
		{DownAfter: time.Microsecond}, {FailoverTimeout: 1500 * time.Microsecond},
	} {
		if d, err := redisdeploy.Start(t.Context(), o); err == nil {
			d.Close()
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
}

func waitRole(t *testing.T, s *redisdeploy.Server, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		role, err := s.Role(ctx)
		cancel()
		if err == nil && role == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: role %q, %v; want %q", s.Name, role, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
