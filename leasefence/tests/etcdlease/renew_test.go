package etcdlease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
)

// rpcCounter counts the calls and streams a client starts, by gRPC method,
// and the etcd leases it sends keep-alives of.
type rpcCounter struct {
	mu        sync.Mutex
	n         map[string]int
	keptAlive []clientv3.LeaseID
}

func (c *rpcCounter) keepAlive(id clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keptAlive = append(c.keptAlive, id)
}

// leasesKeptAlive returns the leases kept alive since the last call.
func (c *rpcCounter) leasesKeptAlive() []clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := c.keptAlive
	c.keptAlive = nil
	return ids
}

// countedStream tells its counter the lease of every keep-alive it sends.
type countedStream struct {
	grpc.ClientStream
	counter *rpcCounter
}

func (s countedStream) SendMsg(m any) error {
	if req, ok := m.(*pb.LeaseKeepAliveRequest); ok {
		s.counter.keepAlive(clientv3.LeaseID(req.ID))
	}
	return s.ClientStream.SendMsg(m)
}

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[method]++
}

// take returns the counts since the last take, and starts again.
func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// countingClient is a client of the test member that counts what it sends.
func countingClient(t *testing.T) (*clientv3.Client, *rpcCounter) {
	t.Helper()
	counter := &rpcCounter{n: map[string]int{}}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		counter.add(method)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		counter.add(method)
		st, err := streamer(ctx, desc, cc, method, opts...)
		return countedStream{ClientStream: st, counter: counter}, err
	}
	c := dialledClient(t, grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream))
	counter.take() // the warm-up read
	return c, counter
}

const (
	rangeRPC     = "/etcdserverpb.KV/Range"
	txnRPC       = "/etcdserverpb.KV/Txn"
	keepAliveRPC = "/etcdserverpb.Lease/LeaseKeepAlive"
)

func renewOK(t *testing.T, c *etcdlease.Coordinator, g leasefence.Grant) {
	t.Helper()
	out, err := c.Renew(t.Context(), leasefence.RenewRequest{RequestID: g.RequestID, Token: g.Token})
	if err != nil || !out.OK || out.Grant.Token != g.Token {
		t.Fatalf("Renew(%v) = %+v, %v; want renewed", g.Token, out, err)
	}
}

// renewRefused checks that a renewal of tok is refused for want; it may be
// called from any goroutine.
func renewRefused(t *testing.T, c *etcdlease.Coordinator, tok leasefence.Token, want leasefence.Reason) {
	t.Helper()
	out, err := c.Renew(t.Context(), leasefence.RenewRequest{RequestID: "renew", Token: tok})
	if err != nil || out.OK || out.Reason != want {
		t.Errorf("Renew(%v) = %+v, %v; want refused %q", tok, out, err, want)
	}
}

// A coordinator renews a grant it made with one keep-alive and one read
// sent together; one that did not make it reads the holder key first, and
// renews in one round trip from then on.
func TestRenewRoundTrips(t *testing.T) {
	prefix := newPrefix()
	madeCli, made := countingClient(t)
	otherCli, other := countingClient(t)
	maker, err := etcdlease.New(madeCli, etcdlease.Options{Prefix: prefix, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := etcdlease.New(otherCli, etcdlease.Options{Prefix: prefix, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = maker.Close(); _ = stranger.Close() })
	g := acquireOK(t, maker, "r", "a")
	made.take()

	for _, tc := range []struct {
		name    string
		c       *etcdlease.Coordinator
		counter *rpcCounter
		reads   int
	}{
		{"the maker", maker, made, 1},
		{"another coordinator, first", stranger, other, 2},
		{"another coordinator, again", stranger, other, 1},
	} {
		renewOK(t, tc.c, g)
		n := tc.counter.take()
		if n[rangeRPC] != tc.reads || n[keepAliveRPC] != 1 || n[txnRPC] != 0 {
			t.Errorf("renewal by %s sent %v; want %d read(s) and 1 keep-alive", tc.name, n, tc.reads)
		}
	}
}

// A coordinator that remembers a grant refuses its renewal once a newer
// holder has the resource, and once it was released, both through another
// coordinator: it keeps alive only the grant's own lease, never the newer
// holder's.
func TestRenewAfterReleaseElsewhere(t *testing.T) {
	prefix := newPrefix()
	makerCli, counter := countingClient(t)
	maker, err := etcdlease.New(makerCli, etcdlease.Options{Prefix: prefix, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = maker.Close() })
	other := newCoordinator(t, etcdlease.Options{Prefix: prefix, TTL: 5 * time.Second})

	for _, tc := range []struct {
		name string
		take bool // a newer holder takes the resource after the release
		want leasefence.Reason
	}{
		{"superseded", true, leasefence.ReasonSuperseded},
		{"released", false, leasefence.ReasonReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource := "r-" + tc.name
			g := acquireOK(t, maker, resource, "a")
			renewOK(t, maker, g)
			own := holderLease(t, prefix, resource)
			if out, err := other.Release(t.Context(), g.Token); err != nil || !out.OK {
				t.Fatalf("Release = %+v, %v", out, err)
			}
			var newer clientv3.LeaseID
			if tc.take {
				acquireOK(t, other, resource, "b")
				newer = holderLease(t, prefix, resource)
			}
			counter.leasesKeptAlive()
			renewRefused(t, maker, g.Token, tc.want)
			renewRefused(t, maker, g.Token, tc.want)
			kept := counter.leasesKeptAlive()
			if len(kept) == 0 {
				t.Fatal("the first refused renewal sent no keep-alive: it never took the remembered path")
			}
			for _, id := range kept {
				if id != own {
					t.Errorf("a refused renewal kept lease %x alive; the grant's own is %x, the newer holder's %x", id, own, newer)
				}
			}
		})
	}
}

// A token with the live grant's resource and fence but another holder is
// refused before anything is kept alive, even by the coordinator that made
// the grant: it never extends the real holder's lease.
func TestRenewOfAnotherHolderKeepsNothingAlive(t *testing.T) {
	c, counter := countingClient(t)
	coord, err := etcdlease.New(c, etcdlease.Options{Prefix: newPrefix(), TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Close() })
	g := acquireOK(t, coord, "r", "a")
	counter.take()
	forged := g.Token
	forged.Holder = "mallory"
	renewRefused(t, coord, forged, leasefence.ReasonUnknown)
	if n := counter.take(); n[keepAliveRPC] != 0 {
		t.Errorf("the forged renewal sent %v: a keep-alive of the real holder's lease", n)
	}
	renewOK(t, coord, g)
}

// Renewals racing a release: every renewal sent after the release answered
// is refused, and none fails.
func TestRenewRacingRelease(t *testing.T) {
	c := newCoordinator(t, etcdlease.Options{TTL: 5 * time.Second})
	g := acquireOK(t, c, "r", "a")
	var released sync.WaitGroup
	released.Add(1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				out, err := c.Renew(t.Context(), leasefence.RenewRequest{RequestID: "renew", Token: g.Token})
				if err != nil || (!out.OK && out.Reason != leasefence.ReasonReleased) {
					t.Errorf("Renew racing the release = %+v, %v", out, err)
				}
			}
			released.Wait()
			renewRefused(t, c, g.Token, leasefence.ReasonReleased)
		})
	}
	if out, err := c.Release(t.Context(), g.Token); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	released.Done()
	wg.Wait()
}
