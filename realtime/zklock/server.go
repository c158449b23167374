package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/internal/scratch"
)

// Jar is where Debian's zookeeper package puts the server's jar, whose
// manifest names every jar it needs; LEASEFENCE_ZK_JAR overrides it.
const Jar = "/usr/share/java/zookeeper.jar"

// ErrNotInstalled: no java on PATH, or no ZooKeeper jar.
var ErrNotInstalled = errors.New("zklock: ZooKeeper is not installed (scripts/zookeeper.sh install installs Debian's zookeeper, which runs on the java already installed)")

// The server's session timeouts: it expires a session at tick
// granularity, and honours any timeout a client asks for between
// minSession and maxSession (ZooKeeper's defaults, 2 and 20 ticks of 2 s,
// would stretch a 1 s TTL to 4 s). Acquire refuses a TTL outside them:
// the lease's deadline is the timeout it asked for.
const (
	tick       = 100 * time.Millisecond
	minSession = 2 * tick
	maxSession = 10 * time.Minute
)

// config is the standalone server's zoo.cfg: loopback only, data in dir,
// no admin server, the four-letter words srvr (readiness) and conf.
func config(dir string, port int) string {
	return fmt.Sprintf(`tickTime=%d
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,conf
`, tick.Milliseconds(), minSession.Milliseconds(), maxSession.Milliseconds(), filepath.Join(dir, "data"), port)
}

// server is a throwaway standalone ZooKeeper: one java process in a
// process group of its own, its data in a directory marked as this
// process's.
type server struct {
	dir    string
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startTimeout bounds the wait for a new server to answer (it answers in
// about half a second on an idle machine).
const startTimeout = 30 * time.Second

// installed is the java and the ZooKeeper jar a server runs on, or
// ErrNotInstalled.
func installed() (java, jar string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	jar = cmp.Or(os.Getenv("LEASEFENCE_ZK_JAR"), Jar)
	if _, err := os.Stat(jar); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	return java, jar, nil
}

// Available reports why the contenders cannot run here (an error matching
// ErrNotInstalled), or nil: $LEASEFENCE_ZK_ADDR names a server, or java
// and Debian's zookeeper package are installed to start one.
func Available() error {
	if os.Getenv(EnvAddr) != "" {
		return nil
	}
	_, _, err := installed()
	return err
}

// startServer starts a standalone server on a free loopback port, its
// data under dir ("" for the system's temporary directory), and waits
// until it serves. On an error nothing is left running.
func startServer(ctx context.Context, dir, name string) (*server, error) {
	java, jar, err := installed()
	if err != nil {
		return nil, err
	}
	own, err := scratch.MkdirTemp(dir, "leasefence-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("zklock: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(own)
		return nil, err
	}
	cfg := filepath.Join(own, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(config(own, port)), 0o600); err != nil {
		os.RemoveAll(own)
		return nil, fmt.Errorf("zklock: %w", err)
	}
	log, err := os.Create(filepath.Join(own, "server.log"))
	if err != nil {
		os.RemoveAll(own)
		return nil, fmt.Errorf("zklock: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(java, "-Xms16m", "-XX:+UseSerialGC", "-cp", jar, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = own, log, log
	procAttr(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(own)
		return nil, fmt.Errorf("zklock: starting ZooKeeper (%s): %w", java, err)
	}
	s := &server{dir: own, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(ctx); err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

// waitReady waits until the server serves: it answers ruok before it
// takes sessions.
func (s *server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if serving(s.addr) {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("zklock: ZooKeeper exited at start (%v)%s", s.cmd.ProcessState, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("zklock: ZooKeeper did not answer on %s: %w%s", s.addr, ctx.Err(), s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fourLetter is the server at addr's answer to a four-letter word.
func fourLetter(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// serving reports whether the standalone server at addr answers the
// four-letter word srvr with its statistics (not with "not currently
// serving requests").
func serving(addr string) bool {
	reply, err := fourLetter(addr, "srvr")
	return err == nil && strings.Contains(reply, "Mode: standalone")
}

// sessionBounds reads the session timeouts the server at addr grants as
// asked, from its answer to conf (scripts/zookeeper.sh's server allows
// the word).
func sessionBounds(addr string) (lo, hi time.Duration, err error) {
	reply, err := fourLetter(addr, "conf")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(reply, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		ms, err := strconv.Atoi(v)
		switch {
		case k != "minSessionTimeout" && k != "maxSessionTimeout":
		case err != nil:
			return 0, 0, fmt.Errorf("%s=%q", k, v)
		case k == "minSessionTimeout":
			lo = time.Duration(ms) * time.Millisecond
		default:
			hi = time.Duration(ms) * time.Millisecond
		}
	}
	if lo <= 0 || hi < lo {
		return 0, 0, fmt.Errorf("no session timeouts in its answer to conf: %q", reply)
	}
	return lo, hi, nil
}

func (s *server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return "; its log ends:\n" + strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// close kills the server's process group, waits for it, and removes its
// directory.
func (s *server) close() error {
	if s.cmd == nil {
		return nil
	}
	kill(s.cmd)
	<-s.exited
	s.cmd = nil
	return os.RemoveAll(s.dir)
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("zklock: a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
