package etcdlease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// TestGateRefusesBadIDsUpFront: a stale writer with a 1.6 MB holder id was
// judged, its log write exceeded etcd's request limit, and Commit answered a
// *StaleFenceError with Seq 0 that the log never held. The id rule refuses it
// before anything is sent, at Commit, Admit and NewGate alike.
func TestGateRefusesBadIDsUpFront(t *testing.T) {
	for _, bad := range leasetest.BadIDs() {
		t.Run(bad.Name, func(t *testing.T) {
			g := openGate(t, "r")
			ctx := t.Context()
			if err := g.Commit(ctx, tok("r", "b", 7), "b1"); err != nil {
				t.Fatal(err)
			}
			leasetest.CheckIDError(t, "stale Commit", g.Commit(ctx, tok("r", bad.ID, 5), "late"), leasefence.IDHolder, bad.Why)
			leasetest.CheckIDError(t, "fresh Commit", g.Commit(ctx, tok("r", bad.ID, 9), "new"), leasefence.IDHolder, bad.Why)
			leasetest.CheckIDError(t, "Admit", g.Admit(ctx, tok("r", bad.ID, 9)), leasefence.IDHolder, bad.Why)
			_, err := etcdlease.NewGate(cli, bad.ID, etcdlease.GateOptions{Prefix: newPrefix()})
			leasetest.CheckIDError(t, "NewGate", err, leasefence.IDResource, bad.Why)
			mustRejections(t, g)
			mustFloor(t, g, tok("r", "b", 7))
			mustWritten(t, g, "b1")
		})
	}
	// The longest id there is still works end to end.
	long := leasetest.LongestID()
	g := openGate(t, long)
	if err := g.Commit(t.Context(), tok(long, long, 9), "v"); err != nil {
		t.Fatalf("Commit with MaxIDLen ids: %v", err)
	}
	if err := g.Commit(t.Context(), tok(long, long, 8), "late"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("stale Commit with MaxIDLen ids: %v", err)
	}
	mustRejections(t, g, leasefence.Rejection{Seq: 1, Resource: long, Holder: long, Fence: 8, FloorHolder: long, FloorFence: 9})
}

// cancellingClient is a client of the test member that, once armed, cancels
// the call's ctx just before its next transaction is sent: a ctx that ends
// between the gate's floor read and its log write.
func cancellingClient(t *testing.T) (c *clientv3.Client, arm func(cancel context.CancelFunc)) {
	t.Helper()
	var armed atomic.Pointer[context.CancelFunc]
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" {
			if cancel := armed.Swap(nil); cancel != nil {
				(*cancel)()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return interceptedClient(t, intercept), func(cancel context.CancelFunc) { armed.Store(&cancel) }
}

// interceptedClient is a client of the test member whose every unary call
// goes through intercept, connected before it is returned (so that the
// goroutines of the connection run before a test counts goroutines), and
// closed when t ends.
func interceptedClient(t *testing.T, intercept grpc.UnaryClientInterceptor) *clientv3.Client {
	t.Helper()
	return dialledClient(t, grpc.WithChainUnaryInterceptor(intercept))
}

// dialledClient is a client of the test member with the dial options opts,
// connected before it is returned, and closed when t ends.
func dialledClient(t *testing.T, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{member.Endpoint()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Get(t.Context(), "warm-up"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGateRefusalNotLogged: when the refusal cannot be logged, Commit says
// so (ErrRefusalNotLogged, with the refusal as judged), and never answers a
// *StaleFenceError the log does not hold.
func TestGateRefusalNotLogged(t *testing.T) {
	c, arm := cancellingClient(t)
	prefix := newPrefix()
	g := openGateAt(t, c, prefix, "r", &atomic.Int64{})
	if err := g.Commit(t.Context(), tok("r", "b", 7), "b1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	arm(cancel)
	err := g.Commit(ctx, tok("r", "a", 5), "late")
	var nl *leasefence.RefusalNotLoggedError
	if !errors.As(err, &nl) || !errors.Is(err, leasefence.ErrRefusalNotLogged) {
		t.Fatalf("Commit whose log write was cut off = %v, want ErrRefusalNotLogged", err)
	}
	if errors.Is(err, leasefence.ErrStaleFence) {
		t.Errorf("%v matches ErrStaleFence, which promises a logged refusal", err)
	}
	var stale *leasefence.StaleFenceError
	if errors.As(err, &stale) {
		t.Errorf("%v carries a *StaleFenceError (Seq %d)", err, stale.Seq)
	}
	want := leasefence.Rejection{Resource: "r", Holder: "a", Fence: 5, FloorHolder: "b", FloorFence: 7}
	if nl.Rejection != want || !errors.Is(err, context.Canceled) {
		t.Errorf("refusal %+v (%v), want %+v and context.Canceled", nl.Rejection, err, want)
	}
	mustRejections(t, g)
	mustWritten(t, g, "b1")
	// The next refusal is logged as Seq 1: nothing was half written.
	if err := g.Commit(t.Context(), tok("r", "a", 5), "late"); !errors.As(err, &stale) || stale.Seq != 1 {
		t.Fatalf("next stale Commit = %v, want Seq 1", err)
	}
}

// TestGateOpLimit: a Commit takes at most etcdlease.MaxCommitOps operations
// whether or not it raises the floor (the raise is one of etcd's 128
// operations per transaction); one more is ErrTooManyOps, before anything is
// sent, in both cases.
func TestGateOpLimit(t *testing.T) {
	g := openGate(t, "r")
	ctx := t.Context()
	ops := func(n int, tag string) []clientv3.Op {
		out := make([]clientv3.Op, n)
		for i := range out {
			out[i] = clientv3.OpPut(fmt.Sprintf("%s%s-%04d", g.data, tag, i), tag)
		}
		return out
	}
	cases := []struct {
		name  string
		token leasefence.Token
	}{
		{"raising the floor", tok("r", "a", 5)},
		{"at the floor", tok("r", "a", 5)},
		{"raising it again", tok("r", "b", 9)},
	}
	for i, tc := range cases {
		tag := fmt.Sprint(i)
		if err := g.gate.Commit(ctx, tc.token, ops(etcdlease.MaxCommitOps+1, "over"+tag)...); !errors.Is(err, etcdlease.ErrTooManyOps) {
			t.Errorf("%s: Commit of MaxCommitOps+1 ops = %v, want ErrTooManyOps", tc.name, err)
		}
		if err := g.gate.Commit(ctx, tc.token, ops(etcdlease.MaxCommitOps, tag)...); err != nil {
			t.Errorf("%s: Commit of MaxCommitOps ops = %v", tc.name, err)
		}
	}
	got, err := g.Written(ctx)
	if err != nil || len(got) != 3*etcdlease.MaxCommitOps {
		t.Errorf("%d values written (%v), want %d", len(got), err, 3*etcdlease.MaxCommitOps)
	}
	mustFloor(t, g, tok("r", "b", 9))
}

// TestCoordinatorRefusesBadIDsUpFront: the coordinator applies the core's
// id rule to holder, resource and request id before anything is sent: a 1.6
// MB holder was etcd's "request is too large", a non-UTF-8 one was granted.
func TestCoordinatorRefusesBadIDsUpFront(t *testing.T) {
	c := newCoordinator(t, etcdlease.Options{})
	ctx := t.Context()
	for _, bad := range leasetest.BadIDs() {
		t.Run(bad.Name, func(t *testing.T) {
			_, err := c.Acquire(ctx, leasefence.AcquireRequest{RequestID: "1", Holder: bad.ID, Resource: "r"})
			leasetest.CheckIDError(t, "Acquire(holder)", err, leasefence.IDHolder, bad.Why)
			_, err = c.Acquire(ctx, leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: bad.ID})
			leasetest.CheckIDError(t, "Acquire(resource)", err, leasefence.IDResource, bad.Why)
			_, err = c.Acquire(ctx, leasefence.AcquireRequest{RequestID: bad.ID, Holder: "a", Resource: "r"})
			leasetest.CheckIDError(t, "Acquire(request id)", err, leasefence.IDRequestID, bad.Why)
			_, err = c.Renew(ctx, leasefence.RenewRequest{RequestID: "2", Token: tok("r", bad.ID, 1)})
			leasetest.CheckIDError(t, "Renew(holder)", err, leasefence.IDHolder, bad.Why)
			_, err = c.Renew(ctx, leasefence.RenewRequest{RequestID: bad.ID, Token: tok("r", "a", 1)})
			leasetest.CheckIDError(t, "Renew(request id)", err, leasefence.IDRequestID, bad.Why)
			_, err = c.Release(ctx, tok(bad.ID, "a", 1))
			leasetest.CheckIDError(t, "Release(resource)", err, leasefence.IDResource, bad.Why)
		})
	}
	// Nothing was granted: the resource is free for a good request.
	if out, err := c.Acquire(ctx, leasefence.AcquireRequest{RequestID: "3", Holder: "a", Resource: "r"}); err != nil || !out.OK {
		t.Fatalf("Acquire after the refused ones = %+v, %v", out, err)
	}
}
