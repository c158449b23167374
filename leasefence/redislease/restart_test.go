package redislease_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// server is a redis-server of a test's own, on loopback and a temporary
// directory, which the test can crash (SIGKILL) and start again.
type server struct {
	t    *testing.T
	dir  string
	port string
	aof  bool
	cmd  *exec.Cmd
}

// startServer starts a redis-server for t, with AOF and appendfsync always
// if aof, and with no persistence at all otherwise. It skips t when
// redis-server is not installed.
func startServer(t *testing.T, aof bool) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: scripts/redis.sh start installs it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	s := &server{t: t, dir: t.TempDir(), port: port, aof: aof}
	s.start()
	t.Cleanup(s.crash)
	return s
}

func (s *server) start() {
	s.t.Helper()
	appendonly := "no"
	if s.aof {
		appendonly = "yes"
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", s.port, "--dir", s.dir,
		"--appendonly", appendonly, "--appendfsync", "always", "--save", "")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := s.client()
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(s.t.Context()).Err() != nil; {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %s did not answer; see %s", s.port, log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crash kills the server as a power cut would: nothing is flushed that was
// not already on disk.
func (s *server) crash() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

func (s *server) restart() {
	s.t.Helper()
	s.crash()
	s.start()
}

func (s *server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + s.port, MaxRetries: -1})
}

// acquire grants resource to holder through a coordinator on c, failing t
// unless granted.
func acquire(t *testing.T, c redis.UniversalClient, opts redislease.Options, resource, holder string) leasefence.Token {
	t.Helper()
	opts.TTL = 10 * time.Second
	coord, err := redislease.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := coord.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: holder + "-" + resource, Holder: holder, Resource: resource})
	if err != nil || !out.OK {
		t.Fatalf("Acquire(%s) by %s = %+v, %v", resource, holder, out, err)
	}
	return out.Grant.Token
}

func commit(ctx context.Context, g *redislease.Gate, t leasefence.Token) error {
	return g.Commit(ctx, t, func(ctx context.Context, p redis.Pipeliner) error {
		p.RPush(ctx, "{leasefence:}app:"+t.Resource, t.Holder)
		return nil
	})
}

// A Redis restarted without its counter reissues fences. A gate whose floor
// lives elsewhere (here in memory) refuses the new holder: safe, but
// unavailable until an operator raises MinFence. A gate in the same Redis
// rewinds with the counter and admits the new holder, and after it a stale
// holder whose fence is above the rewound floor: what losing the counter
// costs. Its refusal log is lost with the floor, and numbered from 1 again.
func TestRestartWithoutAOFReissuesFences(t *testing.T) {
	s := startServer(t, false)
	ctx := t.Context()
	before := s.client()
	defer before.Close()
	acquire(t, before, redislease.Options{}, "warm-up", "x")
	stale := acquire(t, before, redislease.Options{}, "r", "agent-b")
	elsewhere := leasefence.NewFenceGate("r") // the floor lives outside this Redis
	if err := elsewhere.Commit(ctx, stale, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	same, err := redislease.NewGate(before, "r", redislease.GateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(ctx, same, stale); err != nil {
		t.Fatal(err)
	}
	below := leasefence.Token{Resource: "r", Holder: "agent-z", Fence: 1}
	if err := commit(ctx, same, below); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("fence 1 below the floor: %v", err)
	}
	if n, err := same.RejectionCount(ctx); n != 1 || err != nil {
		t.Fatalf("RejectionCount before the restart = %d, %v", n, err)
	}

	s.restart()
	after := s.client()
	defer after.Close()
	newer := acquire(t, after, redislease.Options{}, "r", "agent-c")
	if newer.Fence > stale.Fence {
		t.Fatalf("after a restart without AOF the fence is %d, above %d: the counter survived?", newer.Fence, stale.Fence)
	}
	t.Logf("fence %d issued again after the restart (agent-b holds %d)", newer.Fence, stale.Fence)

	err = elsewhere.Commit(ctx, newer, func(context.Context) error { return nil })
	if !errors.Is(err, leasefence.ErrStaleFence) && !errors.Is(err, leasefence.ErrTokenConflict) {
		t.Fatalf("the gate whose floor lives elsewhere admitted the reissued fence: %v", err)
	}

	same, _ = redislease.NewGate(after, "r", redislease.GateOptions{})
	// The refusal log went with the floor: the count starts again, so the
	// next refusal is Seq 1 again, and a reader whose cursor was at the old
	// count reads nothing (missed 0) until the log passes it.
	if n, err := same.RejectionCount(ctx); n != 0 || err != nil {
		t.Fatalf("RejectionCount after a restart without AOF = %d, %v; want 0 (the log is lost)", n, err)
	}
	if floor, err := same.Floor(ctx); floor != (leasefence.Token{}) || err != nil {
		t.Fatalf("floor after a restart without AOF = %v, %v; want none", floor, err)
	}
	if err := commit(ctx, same, newer); err != nil {
		t.Fatalf("the gate in the same Redis refused the reissued fence: %v; want its floor rewound", err)
	}
	if err := commit(ctx, same, stale); err != nil {
		t.Fatalf("the stale holder's write = %v; want admitted by the rewound floor (the documented cost)", err)
	}
	if err := commit(ctx, same, below); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("fence 1 below the new floor: %v", err)
	}
	if rs, missed, err := same.RejectionsSince(ctx, 1); len(rs) != 0 || missed != 0 || err != nil {
		t.Fatalf("RejectionsSince(1), the cursor of before the restart = %+v, missed %d, %v; want nothing: Seq 1 is reused", rs, missed, err)
	}
	if rs, _, err := same.RejectionsSince(ctx, 0); len(rs) != 1 || rs[0].Seq != 1 || rs[0].FloorFence != stale.Fence || err != nil {
		t.Fatalf("RejectionsSince(0) after the restart = %+v, %v; want the new refusal as Seq 1", rs, err)
	}

	// The operator's recovery: every fence above the highest floor.
	floor := elsewhere.Floor()
	operator, err := redislease.New(after, redislease.Options{TTL: 10 * time.Second, MinFence: floor.Fence})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := operator.Release(ctx, newer); err != nil || !out.OK {
		t.Fatalf("Release of the reissued lease = %+v, %v", out, err)
	}
	recovered := acquire(t, after, redislease.Options{MinFence: floor.Fence}, "r", "agent-d")
	if recovered.Fence <= floor.Fence {
		t.Fatalf("fence %d with MinFence %d", recovered.Fence, floor.Fence)
	}
	if err := elsewhere.Commit(ctx, recovered, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("after MinFence was raised, the gate elsewhere refused fence %d: %v", recovered.Fence, err)
	}
}

// With AOF and appendfsync always, a crash loses nothing that was answered:
// fences keep increasing, the gate's floor and refusal log are still there,
// and the gate goes on judging and counting as before.
func TestRestartWithAOFKeepsFences(t *testing.T) {
	s := startServer(t, true)
	ctx := t.Context()
	before := s.client()
	defer before.Close()
	acquire(t, before, redislease.Options{}, "warm-up", "x") // so that first's fence has one below it
	first := acquire(t, before, redislease.Options{}, "r", "agent-a")
	g, _ := redislease.NewGate(before, "r", redislease.GateOptions{})
	if err := commit(ctx, g, first); err != nil {
		t.Fatal(err)
	}
	below := leasefence.Token{Resource: "r", Holder: "agent-z", Fence: first.Fence - 1}
	if err := commit(ctx, g, below); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("a fence below the floor: %v", err)
	}

	s.restart()
	after := s.client()
	defer after.Close()
	second := acquire(t, after, redislease.Options{}, "r2", "agent-b")
	if second.Fence <= first.Fence {
		t.Fatalf("fence %d after %d across a crash with appendfsync always", second.Fence, first.Fence)
	}
	g, _ = redislease.NewGate(after, "r", redislease.GateOptions{})
	if floor, err := g.Floor(ctx); err != nil || floor != first {
		t.Fatalf("floor after the crash = %v, %v; want %v", floor, err, first)
	}
	// The refusal log survives too, and goes on counting.
	if rs, missed, err := g.RejectionsSince(ctx, 0); err != nil || missed != 0 || len(rs) != 1 || rs[0].Seq != 1 || rs[0].Fence != below.Fence {
		t.Fatalf("RejectionsSince(0) after the crash = %+v, missed %d, %v; want the refusal of before it", rs, missed, err)
	}
	if err := commit(ctx, g, below); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("the stale fence after the crash: %v, want ErrStaleFence", err)
	}
	if n, err := g.RejectionCount(ctx); n != 2 || err != nil {
		t.Fatalf("RejectionCount after the crash and one more refusal = %d, %v; want 2", n, err)
	}
	if err := commit(ctx, g, first); err != nil {
		t.Fatalf("the floor's own holder after the crash: %v", err)
	}
	held, err := redislease.New(after, redislease.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := held.Acquire(ctx, leasefence.AcquireRequest{RequestID: "late", Holder: "agent-c", Resource: "r"}); err != nil || out.Reason != leasefence.ReasonHeld {
		t.Fatalf("Acquire of r after the crash = %+v, %v; want still held by agent-a", out, err)
	}
}
