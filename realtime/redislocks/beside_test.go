package redislocks_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/redisbackend"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// On the Redis backend, redsync and redislock run on the backend's own
// Redis, their keys under the run's prefix, so that the faults the run
// plays on it strike them too; on another backend each starts a
// redis-server of its own. Redlock, three independent servers by
// definition, always starts its own.
func TestOnePointLocksRunOnTheRedisBackend(t *testing.T) {
	sc, _ := spec.Builtin("overlap")
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Redis, Resource: registry.Memory, TempDir: t.TempDir()}, sc)
	if errors.Is(err, redisdeploy.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	modes := []history.Mode{registry.Redsync, registry.Redislock, registry.Redlock}
	if err := s.OpenContenders(t.Context(), modes); err != nil {
		t.Fatal(err)
	}
	r := s.Backend.(*redisbackend.Redis)
	for _, m := range modes {
		var sh struct {
			Addrs  []string `json:"addrs"`
			Prefix string   `json:"prefix"`
		}
		if err := json.Unmarshal([]byte(s.Contenders[m].Share), &sh); err != nil {
			t.Fatal(err)
		}
		onBackend := len(sh.Addrs) == 1 && sh.Addrs[0] == r.Addr() && sh.Prefix == r.Prefix()
		if onBackend != (m != registry.Redlock) {
			t.Errorf("%s shares %+v; the backend is at %s, its prefix %s", m, sh, r.Addr(), r.Prefix())
		}
		if m == registry.Redlock {
			continue
		}
		l, err := s.Contenders[m].New(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(t.Context(), "res-1", "agent-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := r.Client().Keys(t.Context(), r.Prefix()+string(m)+":*").Result()
		if err != nil || len(keys) == 0 {
			t.Errorf("%s holds a lock, and the backend's Redis has no key under %s: %v, %v", m, r.Prefix()+string(m)+":", keys, err)
		}
		if err := lease.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// Elsewhere a one-server lock starts a server of its own.
func TestOnePointLocksElsewhereStartTheirOwn(t *testing.T) {
	sc, _ := spec.Builtin("overlap")
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Memory, TempDir: t.TempDir()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	err = s.OpenContenders(t.Context(), []history.Mode{registry.Redsync})
	if errors.Is(err, redisdeploy.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if sh := s.Contenders[registry.Redsync].Share; strings.Contains(sh, "prefix") {
		t.Errorf("redsync on the memory backend shares %s: want a server of its own, no run's prefix", sh)
	}
}
