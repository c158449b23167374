package etcdcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/realtime/etcdcluster"
)

func TestMain(m *testing.M) {
	etcdcluster.ServeMemberIfAsked()
	if dir := os.Getenv(parentEnv); dir != "" {
		os.Exit(runParent(dir))
	}
	os.Exit(m.Run())
}

// parentEnv makes the test binary a parent of a cluster (runParent), for
// the tests that end a parent from outside.
const parentEnv = "ETCDCLUSTER_TEST_PARENT"

// parentReport is what a parent says of its cluster once it serves.
type parentReport struct {
	Pids      []int
	Endpoints []string
	Dir       string
}

// runParent starts a cluster in dir, says where it is on standard output
// and runs until SIGTERM or SIGINT, then closes the cluster, as lab does.
func runParent(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: 3, Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	json.NewEncoder(os.Stdout).Encode(parentReport{c.Pids(), c.Endpoints(), c.Dir()})
	<-ctx.Done()
	return 0
}

// startParent runs the test binary as a parent of a cluster in dir and
// returns it and its report.
func startParent(t *testing.T, dir string) (*exec.Cmd, parentReport) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), parentEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var rep parentReport
	if err := json.NewDecoder(out).Decode(&rep); err != nil {
		t.Fatalf("the parent did not start its cluster: %v", err)
	}
	return cmd, rep
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

// A parent ended by SIGTERM (or Ctrl-C) closes its cluster: no member
// process, port or directory is left. A parent killed outright (SIGKILL,
// which it cannot catch) still leaves no member process or port: the
// members end with it; only its directory is left.
func TestParentEndLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		sig     syscall.Signal
		leftDir bool
	}{{syscall.SIGTERM, false}, {syscall.SIGKILL, true}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			cmd, rep := startParent(t, t.TempDir())
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			waitGone(rep.Pids)
			if tc.leftDir {
				os.RemoveAll(rep.Dir)
			}
			assertGone(t, rep.Pids, rep.Endpoints, rep.Dir)
		})
	}
}

// waitGone waits a little for processes that are ending.
func waitGone(pids []int) {
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
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

// Restart ends every member process and starts them again on their data,
// behind the same proxies: what was written is still there.
func TestRestartResumes(t *testing.T) {
	c := startCluster(t, 3)
	if err := put(t, c, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	before := c.Pids()
	if err := c.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, pid := range c.Pids() {
		if pid == 0 || pid == before[i] {
			t.Errorf("member %d: pid %d after the restart, %d before", i, pid, before[i])
		}
	}
	cli, err := etcdembed.Client(c.Endpoints()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after the restart: %v, %v", resp, err)
	}
}
