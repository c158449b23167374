package etcdlease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
)

// staleStream answers keep-alives as a replaced leader does once resumed:
// from its own lessor, at the Raft term before the one every read reports.
type staleStream struct {
	grpc.ClientStream
	left *atomic.Int64
}

func (s staleStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if resp, ok := m.(*pb.LeaseKeepAliveResponse); ok && err == nil && resp.Header != nil && s.left.Add(-1) >= 0 {
		resp.Header.RaftTerm--
	}
	return err
}

// staleLeaderClient is a client of the test member whose next *left
// keep-alive answers come at an older Raft term than the member's.
func staleLeaderClient(t *testing.T) (*clientv3.Client, *atomic.Int64) {
	t.Helper()
	left := new(atomic.Int64)
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		st, err := streamer(ctx, desc, cc, method, opts...)
		return staleStream{ClientStream: st, left: left}, err
	}
	return dialledClient(t, grpc.WithChainStreamInterceptor(stream)), left
}

// coordinatorOn is a coordinator of 5s leases on client c, under prefix.
func coordinatorOn(t *testing.T, c *clientv3.Client, prefix string) *etcdlease.Coordinator {
	t.Helper()
	co, err := etcdlease.New(c, etcdlease.Options{Prefix: prefix, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = co.Close() })
	return co
}

// A keep-alive answered at a Raft term older than a read after it (or
// beside it) may come from a replaced leader, whose restart of the lease
// the new leader never saw: a renewal on it is not known to have happened
// (ErrStaleKeepAlive), whether the coordinator made the grant (one round
// trip) or reads the holder key first.
func TestRenewStaleKeepAliveIsNoRenewal(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	staleCli, stale := staleLeaderClient(t)
	maker, stranger := coordinatorOn(t, staleCli, prefix), coordinatorOn(t, staleCli, prefix)
	g := acquireOK(t, maker, "r", "a")
	for _, tc := range []struct {
		name string
		c    *etcdlease.Coordinator
	}{
		{"the maker", maker},
		{"another coordinator", stranger},
	} {
		stale.Store(1)
		out, err := tc.c.Renew(t.Context(), leasefence.RenewRequest{RequestID: g.RequestID, Token: g.Token})
		if !errors.Is(err, etcdlease.ErrStaleKeepAlive) || out.OK {
			t.Errorf("renewal by %s on a stale keep-alive = %+v, %v; want ErrStaleKeepAlive", tc.name, out, err)
		}
		// Once the keep-alive is answered at the current term, it counts.
		renewOK(t, tc.c, g)
	}
}

// An acquire on a spare lease whose keep-alive came at an older Raft term
// than the transaction's does not take the keep-alive's TTL for the
// grant's: it renews the new grant and dates it from that, or, when that
// keep-alive is stale too, says the outcome is unknown.
func TestAcquireStaleSpareKeepAlive(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	staleCli, stale := staleLeaderClient(t)
	c := coordinatorOn(t, staleCli, prefix)

	acquireOK(t, c, "first", "a")
	waitSpare(t, c)
	stale.Store(1) // the spare's keep-alive only
	acquireOK(t, c, "second", "b")
	if n := stale.Load(); n >= 0 {
		t.Fatalf("the grant on a spare whose keep-alive was stale was not renewed (%d stale answers left of 1)", n)
	}
	// The renewal's keep-alive, answered at the current term, dated the
	// grant: the coordinator remembers it and renews in one round trip.

	waitSpare(t, c)
	stale.Store(2) // the spare's keep-alive and the renewal's
	out, err := c.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "third/c", Holder: "c", Resource: "third"})
	if !errors.Is(err, etcdlease.ErrStaleKeepAlive) || out.OK {
		t.Fatalf("Acquire on a stale spare keep-alive, renewed stale = %+v, %v; want ErrStaleKeepAlive", out, err)
	}
	if n := stale.Load(); n != 0 {
		t.Errorf("%d of 2 stale keep-alive answers were not asked for", n)
	}
	// The transaction did commit: a retry is answered from the keys.
	retried, err := c.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "third/c", Holder: "c", Resource: "third"})
	if err != nil || !retried.OK || retried.Grant.Token.Holder != "c" {
		t.Errorf("retried Acquire = %+v, %v; want the grant", retried, err)
	}
}
