package etcdlease_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// Lock's defaults: a holder name of its own, the default TTL granted, a
// session that renews; a second Lock waits until the first is released, and
// gets a higher fence.
func TestLockDefaultsAndExclusion(t *testing.T) {
	ctx := t.Context()
	prefix := newPrefix()
	a, err := etcdlease.Lock(ctx, cli, "slot", etcdlease.LockOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if h := a.Token().Holder; h == "" || !strings.Contains(h, "-") {
		t.Errorf("default holder %q, want <host>-<pid>-<random>", h)
	}
	if got := a.TTL(); got != etcdlease.DefaultLockTTL {
		t.Errorf("TTL %v, want the default %v", got, etcdlease.DefaultLockTTL)
	}
	left, err := a.Remaining()
	if err != nil || left > etcdlease.DefaultLockTTL-leasefence.DefaultLockSkew(etcdlease.DefaultLockTTL) {
		t.Errorf("Remaining() = %v, %v; want at most the TTL less the default skew", left, err)
	}

	// While a holds it, a bounded Lock of another holder gives up.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if s, err := etcdlease.Lock(short, cli, "slot", etcdlease.LockOptions{Prefix: prefix, Holder: "b"}); !errors.Is(err, context.DeadlineExceeded) {
		if s != nil {
			s.Release(ctx)
		}
		t.Fatalf("Lock while held = %v, want the ctx's deadline", err)
	}

	got := make(chan *leasefence.Session, 1)
	go func() {
		b, err := etcdlease.Lock(ctx, cli, "slot", etcdlease.LockOptions{Prefix: prefix, Holder: "b"})
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	if out, err := a.Release(ctx); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	b := <-got
	if b == nil {
		return
	}
	defer b.Release(ctx)
	if b.Token().Fence <= a.Token().Fence {
		t.Errorf("b's fence %d is not above a's %d", b.Token().Fence, a.Token().Fence)
	}

	// The obvious way from a session to a gated write: its token.
	gate, err := etcdlease.NewGate(cli, "slot", etcdlease.GateOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Commit(ctx, b.Token(), clientv3.OpPut("/data"+prefix, "b")); err != nil {
		t.Fatal(err)
	}
	if err := gate.Commit(ctx, a.Token(), clientv3.OpPut("/data"+prefix, "a")); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Errorf("a's late write = %v, want ErrStaleFence", err)
	}
}

// Release runs the caller's own OnRelease too, after closing what Lock
// made, and joins its error.
func TestLockKeepsTheCallersOnRelease(t *testing.T) {
	errMine := errors.New("mine")
	ran := false
	s, err := etcdlease.Lock(t.Context(), cli, "slot", etcdlease.LockOptions{Prefix: newPrefix(), Hold: leasefence.HoldOptions{
		OnRelease: func() error { ran = true; return errMine },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(t.Context()); !errors.Is(err, errMine) || !ran {
		t.Errorf("Release = %v (ran %v), want the caller's OnRelease run and its error", err, ran)
	}
}

func TestLockBadOptions(t *testing.T) {
	for name, opts := range map[string]etcdlease.LockOptions{
		"TTL not whole seconds": {TTL: 1500 * time.Millisecond},
		"negative skew":         {ClockSkew: -time.Second},
		"skew above the TTL":    {TTL: time.Second, ClockSkew: 2 * time.Second},
		"negative RenewEvery":   {Hold: leasefence.HoldOptions{RenewEvery: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			prefix := newPrefix()
			s, err := etcdlease.Lock(t.Context(), cli, "slot", etcdlease.LockOptions{Prefix: prefix, TTL: opts.TTL, ClockSkew: opts.ClockSkew, Hold: opts.Hold})
			if err == nil {
				s.Release(t.Context())
				t.Fatal("no error")
			}
			// Nothing is held: another Lock gets the slot at once.
			short, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			s2, err2 := etcdlease.Lock(short, cli, "slot", etcdlease.LockOptions{Prefix: prefix})
			if err2 != nil {
				t.Fatalf("after %v: Lock = %v", err, err2)
			}
			s2.Release(t.Context())
		})
	}
}

// Lock leaves nothing held when ctx ends before it returns: while a gate
// of AdmitAt is still admitting, or while the acquire's reply is on its way
// after etcd committed the grant. Another holder then takes the
// slot at once, not after the TTL.
func TestLockLeavesNothingHeldWhenCtxEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lock calls Lock with ctx through a client of its own choosing,
		// and reports whether the fault it injects, which ends ctx, was
		// met.
		lock func(t *testing.T, ctx context.Context, end context.CancelFunc, opts etcdlease.LockOptions) (met bool, err error)
	}{{
		name: "a gate of AdmitAt outlasts ctx",
		lock: func(t *testing.T, ctx context.Context, end context.CancelFunc, opts etcdlease.LockOptions) (bool, error) {
			gate := &leasetest.StalledGate{Name: "slot", Cancel: end}
			opts.Hold.AdmitAt = []leasefence.Gate{gate}
			_, err := etcdlease.Lock(ctx, cli, "slot", opts)
			return gate.Admits() == 1, err
		},
	}, {
		name: "the acquire's reply comes after ctx ended",
		lock: func(t *testing.T, ctx context.Context, end context.CancelFunc, opts etcdlease.LockOptions) (bool, error) {
			var held atomic.Int64
			c := interceptedClient(t, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if method != "/etcdserverpb.KV/Txn" || held.Load() > 0 {
					return invoker(ctx, method, req, reply, cc, opts...)
				}
				// The first transaction, the acquire, commits; the
				// caller's ctx ends while its reply is on the way.
				if err := invoker(context.WithoutCancel(ctx), method, req, reply, cc, opts...); err != nil {
					return err
				}
				held.Add(1)
				end()
				return ctx.Err()
			})
			_, err := etcdlease.Lock(ctx, c, "slot", opts)
			return held.Load() == 1, err
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			met, err := tc.lock(t, ctx, cancel, etcdlease.LockOptions{Prefix: prefix, Holder: "a"})
			if !errors.Is(err, context.Canceled) || !met {
				t.Fatalf("Lock = %v (fault met: %v), want the fault met and ctx's end", err, met)
			}
			wantFree(t, prefix, "slot")
		})
	}
}

// wantFree fails t unless another holder is granted resource under prefix
// at its first attempt.
func wantFree(t *testing.T, prefix, resource string) {
	t.Helper()
	coord, err := etcdlease.New(cli, etcdlease.Options{Prefix: prefix, TTL: etcdlease.DefaultLockTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	client, err := leasefence.NewLockClient("b", etcdlease.DefaultLockTTL, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := leasefence.TryHold(t.Context(), coord, client, resource, leasefence.HoldOptions{})
	if err != nil {
		t.Fatalf("another holder's TryHold = %v, want the lease: the failed Lock left it held", err)
	}
	if _, err := s.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
