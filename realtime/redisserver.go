package realtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedisServer: --backend redis without --redis-url needs Debian's
// redis-server binary on PATH.
var ErrNoRedisServer = errors.New("realtime: redis: no redis-server on PATH: install it (apt-get install redis-server, or scripts/redis.sh start, which installs it), or pass --redis-url")

// redisReady is how long a started server is given to answer.
const redisReady = 15 * time.Second

// redisServer is a throwaway redis-server the lab started: loopback only,
// on a port of its own, its data in a directory of its own, every write in
// its append-only file fsynced before the reply (appendfsync always), the
// setting under which the fence counter survives a restart.
type redisServer struct {
	bin  string
	root string // the temporary directory: data-<n> directories, logs
	port int
	gen  int // the data directory in use: data-<gen>

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// startRedisServer starts a server on a free loopback port and a new
// temporary directory under parent, and waits until it answers.
func startRedisServer(ctx context.Context, parent string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedisServer
	}
	root, err := os.MkdirTemp(parent, "leasefence-redis-")
	if err != nil {
		return nil, fmt.Errorf("realtime: redis: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("realtime: redis: %w", err)
	}
	s := &redisServer{bin: bin, root: root, port: port}
	if err := s.start(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *redisServer) addr() string    { return "127.0.0.1:" + strconv.Itoa(s.port) }
func (s *redisServer) dataDir() string { return filepath.Join(s.root, fmt.Sprintf("data-%d", s.gen)) }
func (s *redisServer) logFile() string {
	return filepath.Join(s.root, fmt.Sprintf("server-%d.log", s.gen))
}

// start runs redis-server on the current data directory and waits until
// it answers (it has loaded its append-only file by then).
func (s *redisServer) start(ctx context.Context) error {
	if err := os.MkdirAll(s.dataDir(), 0o700); err != nil {
		return fmt.Errorf("realtime: redis: %w", err)
	}
	cmd := exec.Command(s.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--protected-mode", "yes",
		"--dir", s.dataDir(), "--appendonly", "yes", "--appendfsync", "always", "--save", "",
		"--daemonize", "no", "--logfile", s.logFile())
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("realtime: redis: starting %s: %w", s.bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()

	cli := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer cli.Close()
	deadline := time.Now().Add(redisReady)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := cli.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("realtime: redis: the server on %s did not answer within %v: %w%s", s.addr(), redisReady, err, s.logTail())
		}
		select {
		case <-s.exited:
			return fmt.Errorf("realtime: redis: %s exited at start (%v)%s", s.bin, cmd.ProcessState, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail is the end of the server's log, for an error.
func (s *redisServer) logTail() string {
	b, err := os.ReadFile(s.logFile())
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return "; its log ends:\n" + strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// stop ends the server: with crash, at once (SIGKILL, as a power cut);
// otherwise with SIGTERM, on which Redis fsyncs its append-only file and
// exits. It waits until the process is gone.
func (s *redisServer) stop(crash bool) {
	if s.cmd == nil {
		return
	}
	sig := os.Kill
	if !crash {
		sig = terminate
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// restart stops the server and starts it again on the same port: on its
// data directory (persist), or crashed and on a new, empty one, as a
// server that kept nothing on disk comes back.
func (s *redisServer) restart(ctx context.Context, persist bool) error {
	s.stop(!persist)
	if !persist {
		s.gen++
	}
	return s.start(ctx)
}

// close stops the server and removes its directory.
func (s *redisServer) close() error {
	s.stop(true)
	return os.RemoveAll(s.root)
}
