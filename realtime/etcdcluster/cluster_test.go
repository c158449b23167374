package etcdcluster_test

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdtest/etcdembed"
	"github.com/leasefence/lab/realtime/etcdcluster"
)

func TestMain(m *testing.M) {
	etcdcluster.ServeMemberIfAsked()
	os.Exit(m.Run())
}

func startCluster(t *testing.T, n int) *etcdcluster.Cluster {
	t.Helper()
	c, err := etcdcluster.Start(t.Context(), etcdcluster.Options{Members: n, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// put writes through the proxies, trying again for d (a put in flight
// when the leader goes may fail: a client tries again).
func put(t *testing.T, c *etcdcluster.Cluster, d time.Duration) error {
	t.Helper()
	cli, err := etcdembed.Client(c.Endpoints()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cli.Put(actx, "k", "v")
		acancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// TestFaultsKeepTheMajorityServing pauses the leader, then partitions a
// member: each time the others elect or keep a leader and serve writes
// through the proxies.
func TestFaultsKeepTheMajorityServing(t *testing.T) {
	c := startCluster(t, 3)
	if err := put(t, c, 10*time.Second); err != nil {
		t.Fatalf("a put on the healthy cluster: %v", err)
	}
	leader, err := c.Leader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(leader); err != nil {
		t.Fatal(err)
	}
	if err := put(t, c, 10*time.Second); err != nil {
		t.Fatalf("a put with the leader paused: %v", err)
	}
	next, err := c.Leader(t.Context())
	if err != nil || next == leader {
		t.Fatalf("leader with %d paused: %d, %v; want another", leader, next, err)
	}
	if err := c.Resume(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.Partition(next); err != nil {
		t.Fatal(err)
	}
	if err := put(t, c, 10*time.Second); err != nil {
		t.Fatalf("a put with the leader partitioned: %v", err)
	}
	if l, err := c.Leader(t.Context()); err != nil || l == next {
		t.Fatalf("leader with %d partitioned: %d, %v; want another", next, l, err)
	}
	c.Heal(next)
	if err := put(t, c, 10*time.Second); err != nil {
		t.Fatalf("a put after the heal: %v", err)
	}
}

// TestCloseLeavesNothing closes a cluster with a member paused and one
// crashed: no member process, port or directory is left.
func TestCloseLeavesNothing(t *testing.T) {
	c := startCluster(t, 3)
	pids, eps, dir := c.Pids(), c.Endpoints(), c.Dir()
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !c.Exited(1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !c.Exited(1) {
		t.Fatal("the killed member is not seen to exit")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pids, eps, dir)
}

// assertGone fails unless every pid has ended, every endpoint refuses
// connections and dir is gone.
func assertGone(t *testing.T, pids []int, eps []string, dir string) {
	t.Helper()
	for _, pid := range pids {
		if pid != 0 && syscall.Kill(pid, 0) == nil {
			t.Errorf("member process %d still runs", pid)
		}
	}
	for _, ep := range eps {
		if conn, err := net.DialTimeout("tcp", ep[len("http://"):], time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections", ep)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", dir, err)
	}
}
