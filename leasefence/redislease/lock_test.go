package redislease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// Lock's defaults, exclusion, and the late write of a holder whose lock is
// over refused by the gate.
func TestLock(t *testing.T) {
	c := needRedis(t)
	ctx := t.Context()
	prefix := newPrefix(t)
	gate, err := redislease.NewGate(c, "slot", redislease.GateOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	write := func(s *leasefence.Session, v string) error {
		return gate.Commit(ctx, s.Token(), func(ctx context.Context, pipe redis.Pipeliner) error {
			return pipe.Set(ctx, "{"+prefix+"}data", v, 0).Err()
		})
	}

	a, err := redislease.Lock(ctx, c, "slot", redislease.LockOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if a.Token().Holder == "" || a.TTL() != redislease.DefaultLockTTL {
		t.Errorf("defaults: holder %q, TTL %v", a.Token().Holder, a.TTL())
	}
	if err := write(a, "a"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if s, err := redislease.Lock(short, c, "slot", redislease.LockOptions{Prefix: prefix}); !errors.Is(err, context.DeadlineExceeded) {
		if s != nil {
			s.Release(ctx)
		}
		t.Fatalf("Lock while held = %v, want the ctx's deadline", err)
	}
	if out, err := a.Release(ctx); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	b, err := redislease.Lock(ctx, c, "slot", redislease.LockOptions{Prefix: prefix, Holder: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if err := write(b, "b"); err != nil {
		t.Fatal(err)
	}
	if err := write(a, "a, late"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Errorf("a's late write = %v, want ErrStaleFence", err)
	}
}

func TestLockBadOptions(t *testing.T) {
	c := needRedis(t)
	for name, opts := range map[string]redislease.LockOptions{
		"TTL not whole milliseconds": {TTL: 1500 * time.Microsecond},
		"negative skew":              {ClockSkew: -time.Second},
		"prefix with braces":         {Prefix: "{x}"},
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := redislease.Lock(t.Context(), c, "slot", opts); err == nil {
				s.Release(t.Context())
				t.Fatal("no error")
			}
		})
	}
}
