package etcdlease_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdtest"
)

func clusterCoordinator(t *testing.T, c *clientv3.Client, ttl time.Duration) *etcdlease.Coordinator {
	t.Helper()
	coord, err := etcdlease.New(c, etcdlease.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return coord
}

func holderClient(t *testing.T, holder string) *leasefence.Client {
	t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func acquireOnce(t *testing.T, svc leasefence.Service, c *leasefence.Client, resource string) leasefence.AcquireOutcome {
	t.Helper()
	req, err := c.BeginAcquire(resource)
	if err != nil {
		t.Fatal(err)
	}
	out, err := svc.Acquire(t.Context(), req)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if out.OK {
		if _, err := c.CompleteAcquire(req, out.Grant); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Stopping the leader mid-lease: the new leader restarts every lease at its
// full TTL, so the lease survives (only longer) and renews under its fence.
func TestClusterLeaderStopsMidLease(t *testing.T) {
	cluster, c := etcdtest.NewCluster(t, 3)
	const ttl = 3 * time.Second
	coord := clusterCoordinator(t, c, ttl)
	a, b := holderClient(t, "agent-a"), holderClient(t, "agent-b")

	start := time.Now()
	out := acquireOnce(t, coord, a, "r")
	if !out.OK {
		t.Fatalf("Acquire = %+v", out)
	}
	leader, err := cluster.WaitLeader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Halfway through the lease: the new leader restarts it with a full
	// TTL, so its new end is at least half a TTL past its own, and the
	// checks below fall between the two.
	time.Sleep(time.Until(start.Add(ttl / 2)))
	leader.Stop()
	if _, err := cluster.WaitLeader(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Past the lease's own TTL, never renewed: still held, because the new
	// leader restarted it (after at least an election timeout).
	time.Sleep(time.Until(start.Add(ttl + 300*time.Millisecond)))
	if held := acquireOnce(t, coord, b, "r"); held.OK || held.Reason != leasefence.ReasonHeld || held.HeldBy != "agent-a" {
		t.Fatalf("after the leader change, past the TTL: %+v, want still held by agent-a", held)
	}
	req, _ := a.BeginRenewal(&leasefence.Lease{Token: out.Grant.Token})
	if r, err := coord.Renew(t.Context(), req); err != nil || !r.OK || r.Grant.Token != out.Grant.Token {
		t.Fatalf("Renew after the leader change = %+v, %v", r, err)
	}
	if r, err := coord.Release(t.Context(), out.Grant.Token); err != nil || !r.OK {
		t.Fatalf("Release = %+v, %v", r, err)
	}
	if next := acquireOnce(t, coord, b, "r"); !next.OK || next.Grant.Token.Fence <= out.Grant.Token.Fence {
		t.Fatalf("Acquire after release = %+v (previous fence %d)", next, out.Grant.Token.Fence)
	}
}

// Restarting every member: leases and fences are durable, and fences keep
// increasing.
func TestClusterFullRestart(t *testing.T) {
	cluster, c := etcdtest.NewCluster(t, 3)
	coord := clusterCoordinator(t, c, 3*time.Second)
	a, b := holderClient(t, "agent-a"), holderClient(t, "agent-b")
	before := acquireOnce(t, coord, a, "r")
	if !before.OK {
		t.Fatalf("Acquire = %+v", before)
	}
	cluster.Close()
	if err := cluster.Restart(); err != nil {
		t.Fatal(err)
	}
	if held := acquireOnce(t, coord, b, "r"); held.OK || held.HeldBy != "agent-a" {
		t.Fatalf("after the restart: %+v, want held by agent-a", held)
	}
	if r, err := coord.Release(t.Context(), before.Grant.Token); err != nil || !r.OK {
		t.Fatalf("Release after the restart = %+v, %v", r, err)
	}
	last := before.Grant.Token.Fence
	for _, res := range []string{"r", "fresh"} {
		out := acquireOnce(t, coord, b, res)
		if !out.OK || out.Grant.Token.Fence <= last {
			t.Fatalf("Acquire(%q) after the restart = %+v, want a fence above %d", res, out, last)
		}
		last = out.Grant.Token.Fence
	}
}

// A holder whose only member stops is cut off: its renewals get no answer,
// and its session reports Lost at its own deadline, while the rest of the
// cluster gives the resource to another holder once the lease expires.
func TestClusterHolderCutOff(t *testing.T) {
	cluster, c := etcdtest.NewCluster(t, 3)
	leader, err := cluster.WaitLeader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var lonely *etcdembed.Member
	for _, m := range cluster.Members {
		if m != leader {
			lonely = m
			break
		}
	}
	cut, err := etcdembed.Client(lonely.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	const ttl = time.Second
	clock := leasefence.NewMonotonicClock("agent-a")
	a, err := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	session, err := leasefence.Hold(t.Context(), clusterCoordinator(t, cut, ttl), a, "r", leasefence.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := session.Lease().Deadline
	lonely.Stop()
	select {
	case <-session.Lost():
	case <-time.After(5 * ttl):
		t.Fatalf("session not lost %v after its member stopped (deadline %v)", 5*ttl, deadline)
	}
	if err := session.Err(); err == nil {
		t.Fatal("Lost closed with a nil Err")
	}
	// Lost at the deadline the holder computed from its own send instant,
	// not a poll later.
	now, _ := clock.Now()
	if late, _ := now.Sub(session.Lease().Deadline); late < 0 || late > 300*time.Millisecond {
		t.Fatalf("Lost %v after the deadline", late)
	}
	// Its release cannot reach etcd either; ctx bounds the wait.
	short, cancelShort := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancelShort()
	if _, err := session.Release(short); err == nil {
		t.Fatal("Release through a stopped member succeeded")
	}
	// The rest of the cluster hands the resource on under a higher fence.
	coord := clusterCoordinator(t, c, ttl)
	b := holderClient(t, "agent-b")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	next, err := leasefence.Hold(ctx, coord, b, "r", leasefence.HoldOptions{MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(t.Context())
	if next.Token().Fence <= session.Token().Fence {
		t.Fatalf("fence %d after %d", next.Token().Fence, session.Token().Fence)
	}
}
