package redisdeploy

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
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one process of the deployment, a data server or a Sentinel, on
// a port and a directory of its own that it keeps across restarts.
type Server struct {
	Name string // "redis-0" (the first primary), "redis-1", ..., "sentinel-0", ...
	Port int

	bin  string
	args []string // after the configuration file
	dir  string
	// owned is the directory a lone server removes on Close ("" for a
	// deployment's server, whose Deployment removes it).
	owned string
	// user and pass authenticate its clients ("" for Redis's default user).
	user, pass string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	paused bool
	cut    bool // partitioned from the deployment (Deployment.Partition)
}

func newServer(root, name string, port int, bin string, args []string, conf string) (*Server, error) {
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redisdeploy: %w", err)
	}
	// The server's own directory and log, in its configuration file so that
	// a rewrite (Sentinel's, or a server's CONFIG REWRITE) keeps them.
	conf += fmt.Sprintf("dir %q\nlogfile %q\n", dir, filepath.Join(dir, "server.log"))
	if err := os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("redisdeploy: %w", err)
	}
	return &Server{Name: name, Port: port, bin: bin, args: args, dir: dir}, nil
}

// Addr is the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// ConfigFile is the server's configuration file, as the Sentinels last
// rewrote it.
func (s *Server) ConfigFile() string { return filepath.Join(s.dir, "redis.conf") }

// Dir is the server's own directory: its configuration file, data and log.
func (s *Server) Dir() string { return s.dir }

// LogFile is the server's log.
func (s *Server) LogFile() string { return filepath.Join(s.dir, "server.log") }

// startTimeout bounds a start's wait for the server to answer.
const startTimeout = 15 * time.Second

// start runs the process and waits until it answers PING.
func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redisdeploy: %s is already running", s.Name)
	}
	cmd := exec.Command(s.bin, append([]string{s.ConfigFile()}, s.args...)...)
	cmd.Dir = s.dir
	procAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisdeploy: starting %s (%s): %w", s.Name, s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited, s.paused = cmd, exited, false

	cli := s.client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		err := cli.Ping(pctx).Err()
		if err == nil {
			// Another deployment's server on a port taken from under
			// this one answers PING too: only this process's own answer
			// counts.
			var pid int
			if pid, err = processID(pctx, cli); err == nil && pid != cmd.Process.Pid {
				err = fmt.Errorf("process %d answers on %s, not %s's %d", pid, s.Addr(), s.Name, cmd.Process.Pid)
			}
		}
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			tail := s.logTail()
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("redisdeploy: %s exited at start: %w%s", s.Name, errPortTaken, tail)
			}
			return fmt.Errorf("redisdeploy: %s exited at start (%v)%s", s.Name, cmd.ProcessState, tail)
		case <-ctx.Done():
			return fmt.Errorf("redisdeploy: %s did not answer on %s: %w%s", s.Name, s.Addr(), err, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// processID is the process_id the server answering cli gives of itself.
func processID(ctx context.Context, cli *redis.Client) (int, error) {
	info, err := cli.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server gives no process_id")
}

// Running reports whether the process runs (paused or not).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Paused reports whether the process is paused.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// Partitioned reports whether the server is cut off from the rest of the
// deployment (Deployment.Partition), until Heal.
func (s *Server) Partitioned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

func (s *Server) setPartitioned(cut bool) {
	s.mu.Lock()
	s.cut = cut
	s.mu.Unlock()
}

// errNotRunning: a fault on a server that is not running.
var errNotRunning = errors.New("not running")

// errPortTaken: a server's free port was taken between freePorts and the
// server's bind, by a process of the machine's (a client's connection
// takes its local port from the same range). A start that meets it is
// tried again on other ports (startAttempts).
var errPortTaken = errors.New("its port was taken before it bound it")

// startAttempts is how many times Start and StartServer try, each on ports
// of their own, when a server's port was taken before it bound it.
const startAttempts = 3

// retryTakenPort runs start until it succeeds, fails for another reason
// than a taken port, or has been tried startAttempts times.
func retryTakenPort(start func() error) error {
	var err error
	for range startAttempts {
		if err = start(); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

// Pause stops the process (SIGSTOP): it keeps its connections and its
// port, and answers nothing until Resume.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redisdeploy: pause %s: %w", s.Name, errNotRunning)
	}
	if err := pause(s.cmd.Process); err != nil {
		return fmt.Errorf("redisdeploy: pause %s: %w", s.Name, err)
	}
	s.paused = true
	return nil
}

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redisdeploy: resume %s: %w", s.Name, errNotRunning)
	}
	if err := resume(s.cmd.Process); err != nil {
		return fmt.Errorf("redisdeploy: resume %s: %w", s.Name, err)
	}
	s.paused = false
	return nil
}

// Kill ends the process at once (SIGKILL, paused or not), as a power cut,
// and waits until it is gone. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = kill(s.cmd.Process)
	<-s.exited
	s.cmd, s.paused = nil, false
}

// Restart kills the process if it runs and starts it again on the same
// port, configuration file and data: it loads its append-only file, and
// takes the role its configuration file now gives it.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	return s.start(ctx)
}

// Client is a go-redis client of this one server, which never resends a
// command on its own (a deployment's data server: as AppUser); the caller
// closes it.
func (s *Server) Client() *redis.Client { return s.client() }

func (s *Server) client() *redis.Client {
	// RESP2: the Sentinel commands' replies are read as arrays.
	return redis.NewClient(&redis.Options{Addr: s.Addr(), Username: s.user, Password: s.pass, MaxRetries: -1, DialTimeout: time.Second, Protocol: 2})
}

// Role is the server's role as it reports it: "master" or "slave" (or
// "sentinel").
func (s *Server) Role(ctx context.Context) (string, error) {
	cli := s.client()
	defer cli.Close()
	r, err := cli.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(r) == 0 {
		return "", fmt.Errorf("redisdeploy: %s answered ROLE with nothing", s.Name)
	}
	role, _ := r[0].(string)
	return role, nil
}

// info is one section of INFO, as a map.
func (s *Server) info(ctx context.Context, section string) (map[string]string, error) {
	cli := s.client()
	defer cli.Close()
	text, err := cli.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for line := range strings.SplitSeq(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// logTail is the end of the server's log, for an error.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.LogFile())
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return "; " + s.Name + "'s log ends:\n" + strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// freePorts are n distinct loopback ports nothing listened on a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("redisdeploy: a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
