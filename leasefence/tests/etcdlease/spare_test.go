package etcdlease_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
)

// waitSpare waits for c's background grant of a spare lease and returns it.
func waitSpare(t *testing.T, c *etcdlease.Coordinator) clientv3.LeaseID {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ids := c.SpareLeases(); len(ids) != 0 {
			return ids[len(ids)-1]
		}
	}
	t.Fatal("no spare lease was granted after an acquire")
	return 0
}

func acquireOK(t *testing.T, c *etcdlease.Coordinator, resource, holder string) leasefence.Grant {
	t.Helper()
	out, err := c.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: resource + "/" + holder + "/" + fmt.Sprint(time.Now().UnixNano()), Holder: holder, Resource: resource})
	if err != nil || !out.OK {
		t.Fatalf("Acquire(%s) = %+v, %v", resource, out, err)
	}
	return out.Grant
}

// holderLease is the etcd lease the holder key of resource is attached to.
func holderLease(t *testing.T, prefix, resource string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix+"holders/"+resource)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("holder key of %s: %v, %v", resource, resp, err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// A grant on the spare lease starts its TTL at the acquire, not at the
// spare's grant: the holder's send-anchored deadline stays within the
// coordinator's expiry.
func TestSpareLeaseRestartsAtAcquire(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	c := newCoordinator(t, etcdlease.Options{Prefix: prefix, TTL: 4 * time.Second})
	acquireOK(t, c, "first", "a")
	spare := waitSpare(t, c)
	// Aged past a second by etcd's count (under 3s left, so a restart
	// shows), and still well under the half TTL (2s) past which the
	// coordinator no longer tries a spare.
	aged := waitTTL(t, spare, 2)
	g := acquireOK(t, c, "second", "b")
	if got := holderLease(t, prefix, "second"); got != spare {
		t.Fatalf("the grant used lease %x, not the spare %x", got, spare)
	}
	if g.TTL != 4*time.Second {
		t.Errorf("Grant.TTL = %v, want the granted 4s", g.TTL)
	}
	ttl, err := cli.TimeToLive(t.Context(), spare)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL < 3 || ttl.GrantedTTL != 4 {
		t.Errorf("the spare's remaining TTL after the acquire = %ds of %ds: not restarted", ttl.TTL, ttl.GrantedTTL)
	}
	// Past the spare's original expiry (under 3s after it was aged), the
	// resource is still held.
	time.Sleep(time.Until(aged.Add(3300 * time.Millisecond)))
	out, err := c.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "late", Holder: "c", Resource: "second"})
	if err != nil || out.Reason != leasefence.ReasonHeld || out.HeldBy != "b" || out.RetryAfter <= 0 || out.RetryAfter > 4*time.Second {
		t.Errorf("Acquire of the resource after the spare's first expiry = %+v, %v; want held by b", out, err)
	}
}

// waitTTL waits until etcd says lease has at most secs seconds left (it
// rounds down), and returns when it said so.
func waitTTL(t *testing.T, lease clientv3.LeaseID, secs int64) time.Time {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ttl, err := cli.TimeToLive(t.Context(), lease)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL <= secs {
			return time.Now()
		}
	}
	t.Fatalf("lease %x has more than %ds left after 10s", lease, secs)
	return time.Time{}
}

// A spare that expired (or is too old to try) or was revoked is never
// resurrected: the acquire grants a fresh lease.
func TestSpareLeaseGoneFallsBackToGrant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, id clientv3.LeaseID)
	}{
		{"revoked", func(t *testing.T, id clientv3.LeaseID) {
			if _, err := cli.Revoke(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", func(t *testing.T, id clientv3.LeaseID) {
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if ttl, err := cli.TimeToLive(t.Context(), id); err == nil && ttl.TTL == -1 {
					return
				}
			}
			t.Fatal("the spare did not expire")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix()
			c := newCoordinator(t, etcdlease.Options{Prefix: prefix, TTL: time.Second})
			acquireOK(t, c, "first", "a")
			spare := waitSpare(t, c)
			tc.kill(t, spare)
			acquireOK(t, c, "second", "b")
			got := holderLease(t, prefix, "second")
			if got == spare {
				t.Fatalf("the grant used the dead spare %x", spare)
			}
			if ttl, err := cli.TimeToLive(t.Context(), spare); err != nil || ttl.TTL != -1 {
				t.Errorf("the dead spare: %+v, %v; want not found", ttl, err)
			}
		})
	}
}

// A refused acquire attaches nothing to the lease it took; one etcd lease
// never carries two grants, even with acquires racing for the spare.
func TestSpareLeaseOneGrantEach(t *testing.T) {
	prefix := newPrefix()
	c := newCoordinator(t, etcdlease.Options{Prefix: prefix, TTL: 5 * time.Second})
	acquireOK(t, c, "held", "a")
	spare := waitSpare(t, c)
	out, err := c.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "refused", Holder: "b", Resource: "held"})
	if err != nil || out.Reason != leasefence.ReasonHeld {
		t.Fatalf("Acquire of a held resource = %+v, %v", out, err)
	}
	// The refused acquire's lease (the spare it took) carries nothing, and
	// whichever lease is the spare now carries nothing either.
	waitSpare(t, c)
	for _, id := range append(c.SpareLeases(), spare) {
		ttl, err := cli.TimeToLive(t.Context(), id, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		if len(ttl.Keys) != 0 {
			t.Errorf("lease %x of a refused acquire carries %q", id, ttl.Keys)
		}
	}

	const workers, each = 8, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				acquireOK(t, c, fmt.Sprintf("r-%d-%d", w, i), "h")
			}
		})
	}
	wg.Wait()
	seen := map[clientv3.LeaseID]string{holderLease(t, prefix, "held"): "held"}
	for w := range workers {
		for i := range each {
			r := fmt.Sprintf("r-%d-%d", w, i)
			id := holderLease(t, prefix, r)
			if other, dup := seen[id]; dup {
				t.Fatalf("lease %x carries both %s and %s", id, other, r)
			}
			seen[id] = r
		}
	}
}

// waitSpares waits until c holds n spare leases.
func waitSpares(t *testing.T, c *etcdlease.Coordinator, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if len(c.SpareLeases()) == n {
			return
		}
	}
	t.Fatalf("spare leases = %d, want %d", len(c.SpareLeases()), n)
}

// Spares used while young are granted in growing bursts (1, 2, 4); a spare
// that aged unused brings the burst back to one.
func TestSpareLeasesBurst(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, etcdlease.Options{TTL: 2 * time.Second})
	for i, want := range []int{1, 2, 1, 4} {
		acquireOK(t, c, fmt.Sprint("r", i), "a")
		waitSpares(t, c, want)
	}
	time.Sleep(1100 * time.Millisecond) // past half the TTL: too old to try
	acquireOK(t, c, "late", "a")
	waitSpares(t, c, 1)
}
