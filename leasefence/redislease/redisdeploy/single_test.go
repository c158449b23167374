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

func startLone(t *testing.T, p redisdeploy.Persistence) *redisdeploy.Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: apt-get install redis-server (scripts/redis.sh start installs it)")
	}
	s, err := redisdeploy.StartServer(t.Context(), redisdeploy.ServerOptions{Dir: t.TempDir(), Persistence: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, s *redisdeploy.Server, k string) (string, error) {
	t.Helper()
	c := s.Client()
	defer c.Close()
	return c.Get(t.Context(), k).Result()
}

func set(t *testing.T, s *redisdeploy.Server, k string) {
	t.Helper()
	c := s.Client()
	defer c.Close()
	if err := c.Set(t.Context(), k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// What each persistence keeps across each way of coming back.
func TestLoneServerRestarts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		p       redisdeploy.Persistence
		restart func(context.Context, *redisdeploy.Server) error
		keeps   bool
	}{
		{"aof-always killed", redisdeploy.AOFAlways, func(ctx context.Context, s *redisdeploy.Server) error { return s.Restart(ctx) }, true},
		{"aof-everysec stopped in order", redisdeploy.AOFEverySec, func(ctx context.Context, s *redisdeploy.Server) error { s.Stop(); return s.Restart(ctx) }, true},
		{"none killed", redisdeploy.NoPersistence, func(ctx context.Context, s *redisdeploy.Server) error { return s.Restart(ctx) }, false},
		{"aof-always restarted empty", redisdeploy.AOFAlways, func(ctx context.Context, s *redisdeploy.Server) error { return s.RestartEmpty(ctx) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startLone(t, tc.p)
			set(t, s, "k")
			if err := tc.restart(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			v, err := get(t, s, "k")
			if tc.keeps && (err != nil || v != "v") {
				t.Fatalf("GET k after the restart = %q, %v; want kept", v, err)
			}
			if !tc.keeps && !errors.Is(err, redis.Nil) {
				t.Fatalf("GET k after the restart = %q, %v; want gone", v, err)
			}
		})
	}
}

func TestLoneServerPause(t *testing.T) {
	t.Parallel()
	s := startLone(t, redisdeploy.AOFAlways)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	c := s.Client()
	defer c.Close()
	err := c.Ping(ctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a paused server answered PING")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING after Resume = %v", err)
	}
	// Stop continues a paused server so that it can exit in order.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if err := s.Pause(); err == nil {
		t.Fatal("Pause of a stopped server succeeded")
	}
}

func TestLoneServerCloseRemovesItsDirectory(t *testing.T) {
	s := startLone(t, redisdeploy.AOFAlways)
	dir := s.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s after Close: %v", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("a second Close = %v", err)
	}
}

func TestBadPersistence(t *testing.T) {
	if _, err := redisdeploy.StartServer(t.Context(), redisdeploy.ServerOptions{Persistence: 7}); err == nil {
		t.Fatal("StartServer with Persistence 7 succeeded")
	}
	if _, err := redisdeploy.Start(t.Context(), redisdeploy.Options{Persistence: -1}); err == nil {
		t.Fatal("Start with Persistence -1 succeeded")
	}
}
