package redislease_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
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

// Lock leaves nothing held when ctx ends before it returns: while a gate
// of AdmitAt is still admitting, or while the acquire's reply is on its way
// after the script granted the lease. Another holder then takes
// the slot at once, not after the TTL.
func TestLockLeavesNothingHeldWhenCtxEnds(t *testing.T) {
	c := needRedis(t)
	for _, tc := range []struct {
		name string
		// lock calls Lock with ctx, and reports whether the fault it
		// injects, which ends ctx, was met.
		lock func(t *testing.T, ctx context.Context, end context.CancelFunc, opts redislease.LockOptions) (met bool, err error)
	}{{
		name: "a gate of AdmitAt outlasts ctx",
		lock: func(t *testing.T, ctx context.Context, end context.CancelFunc, opts redislease.LockOptions) (bool, error) {
			gate := &leasetest.StalledGate{Name: "slot", Cancel: end}
			opts.Hold.AdmitAt = []leasefence.Gate{gate}
			_, err := redislease.Lock(ctx, c, "slot", opts)
			return gate.Admits() == 1, err
		},
	}, {
		name: "the acquire's reply comes after ctx ended",
		lock: func(t *testing.T, ctx context.Context, end context.CancelFunc, opts redislease.LockOptions) (bool, error) {
			late := redis.NewClient(c.Options())
			t.Cleanup(func() { late.Close() })
			hook := &lateAcquireReply{end: end}
			late.AddHook(hook)
			_, err := redislease.Lock(ctx, late, "slot", opts)
			return hook.held.Load() == 1, err
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			met, err := tc.lock(t, ctx, cancel, redislease.LockOptions{Prefix: prefix, Holder: "a"})
			if !errors.Is(err, context.Canceled) || !met {
				t.Fatalf("Lock = %v (fault met: %v), want the fault met and ctx's end", err, met)
			}
			coord := newCoordinator(t, c, redislease.Options{Prefix: prefix, TTL: redislease.DefaultLockTTL})
			client, err := leasefence.NewLockClient("b", redislease.DefaultLockTTL, 0)
			if err != nil {
				t.Fatal(err)
			}
			s, err := leasefence.TryHold(t.Context(), coord, client, "slot", leasefence.HoldOptions{})
			if err != nil {
				t.Fatalf("another holder's TryHold = %v, want the lease: the failed Lock left it held", err)
			}
			if _, err := s.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// lateAcquireReply ends the caller's ctx (end) once the first acquire
// script (the one whose keys include a request record) has run, and fails
// with ctx's error: the lease is granted in Redis, and ctx ends while the
// reply is on its way.
type lateAcquireReply struct {
	end  context.CancelFunc
	held atomic.Int64
}

func (*lateAcquireReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*lateAcquireReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *lateAcquireReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.held.Load() > 0 || !namesRequestRecord(cmd) {
			return next(ctx, cmd)
		}
		if err := next(context.WithoutCancel(ctx), cmd); err != nil {
			return err // not run (NOSCRIPT, say): the next attempt is held up instead
		}
		h.held.Add(1)
		h.end()
		cmd.SetErr(ctx.Err())
		return ctx.Err()
	}
}

// namesRequestRecord reports whether cmd names an acquire's request record
// ({p}req:<id>), which only the acquire script does.
func namesRequestRecord(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.Contains(s, "}req:") {
			return true
		}
	}
	return false
}
