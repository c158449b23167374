package pgbackend

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

	"github.com/jackc/pgx/v5"

	"github.com/leasefence/lab/internal/scratch"
)

// BinGlob is where the distribution's PostgreSQL server binaries are, a
// directory per major version, as scripts/postgres.sh finds them.
const BinGlob = "/usr/lib/postgresql/*/bin"

// ErrNotInstalled: no PostgreSQL server binaries to start a server of
// the run's own with.
var ErrNotInstalled = errors.New("no PostgreSQL server binaries: no " + BinGlob + " holds initdb and postgres (scripts/postgres.sh install installs Debian's postgresql)")

// binGlob is where Installed looks: BinGlob, but in tests.
var binGlob = BinGlob

// Installed is the directory of the newest PostgreSQL server binaries
// (BinGlob with initdb and postgres in it), or ErrNotInstalled.
func Installed() (string, error) {
	dirs, _ := filepath.Glob(binGlob)
	best, bestVersion := "", -1
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || v <= bestVersion || !executable(filepath.Join(d, "initdb")) || !executable(filepath.Join(d, "postgres")) {
			continue
		}
		best, bestVersion = d, v
	}
	if best == "" {
		return "", ErrNotInstalled
	}
	return best, nil
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// serverUser is the account the server runs as: PostgreSQL refuses to
// run as root, so a root process runs it as the postgres user the
// distribution's package made, as scripts/postgres.sh does.
const serverUser = "postgres"

// dbUser is the superuser initdb makes, whom the run connects as (trust
// authentication, on loopback only).
const dbUser = "leasefence"

// server is a PostgreSQL of the run's own: a cluster initdb made in a
// directory marked as this process's, and one postmaster on a loopback
// port serving it, in a process group of its own. A restart crashes it
// and starts it again on the same data.
type server struct {
	bin  string // the binaries' directory
	dir  string // the scratch directory: the data, the logs
	port int
	as   *account // nil: run as this process's user

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
}

// startTimeout bounds initdb, and a start's wait for the server to answer
// (its crash recovery included).
const startTimeout = 60 * time.Second

// startAttempts is how many free ports a new server tries, when the one
// it was given is taken before it binds it.
const startAttempts = 3

// errPortTaken: the server's free port was taken before it bound it.
var errPortTaken = errors.New("its port was taken before it bound it")

// startServer makes a cluster under tempDir ("" for the system's
// temporary directory) and starts a server on it, on a free loopback
// port; it returns once the server answers. On an error nothing is left
// running, and nothing on disk.
func startServer(ctx context.Context, tempDir string) (*server, error) {
	bin, err := Installed()
	if err != nil {
		return nil, err
	}
	as, err := serverAccount()
	if err != nil {
		return nil, err
	}
	dir, err := scratch.MkdirTemp(tempDir, "leasefence-pg-run-")
	if err != nil {
		return nil, fmt.Errorf("pgbackend: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil { // as the server names its data directory
		return nil, errors.Join(fmt.Errorf("pgbackend: %w", err), os.RemoveAll(dir))
	}
	s := &server{bin: bin, dir: dir, as: as}
	if err := s.initdb(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	for range startAttempts {
		if s.port, err = freePort(); err != nil {
			break
		}
		if err = s.start(ctx); !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

// initdb makes the cluster in dir/data: trust authentication, since the
// server listens on loopback only and is thrown away, and no sync to
// disk of what it wrote, which only a crash of the machine would lose.
func (s *server) initdb(ctx context.Context) error {
	if err := s.as.own(s.dir); err != nil {
		return fmt.Errorf("pgbackend: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "initdb"), "-D", s.data(), "-U", dbUser,
		"--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
	procAttr(cmd, s.as)
	if out, err := cmd.CombinedOutput(); err != nil {
		hint := ""
		if s.as != nil {
			hint = fmt.Sprintf(" (it runs as user %s, who must be able to reach %s: a temporary directory closed to others, as root's TMPDIR may be, keeps it out)", serverUser, s.dir)
		}
		return fmt.Errorf("pgbackend: initdb in %s: %w%s%s", s.data(), err, hint, tail("its output", string(out)))
	}
	return nil
}

func (s *server) data() string { return filepath.Join(s.dir, "data") }

func (s *server) logFile() string { return filepath.Join(s.dir, "server.log") }

// URL is the server's, for its superuser and its default database.
func (s *server) URL() string {
	return fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", dbUser, net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
}

// start runs the postmaster on the cluster, and waits until it answers
// as itself. fsync is off: a restart crashes the server, not the
// machine, and what the server wrote before is in the system's cache,
// which its recovery reads.
func (s *server) start(ctx context.Context) error {
	log, err := os.OpenFile(s.logFile(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgbackend: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	procAttr(cmd, s.as)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgbackend: starting %s: %w", cmd.Path, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)
	if err := s.waitReady(ctx); err != nil {
		return errors.Join(err, s.stop())
	}
	return nil
}

// waitReady waits until the server on s.port answers, and is this
// cluster's (a server of another's on a port taken from under it
// answers too).
func (s *server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		err := s.answers(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			t := s.logTail()
			if strings.Contains(t, "could not bind") || strings.Contains(t, "already in use") {
				return fmt.Errorf("pgbackend: PostgreSQL exited at start: %w%s", errPortTaken, t)
			}
			return fmt.Errorf("pgbackend: PostgreSQL exited at start (%v)%s", s.cmd.ProcessState, t)
		case <-ctx.Done():
			return fmt.Errorf("pgbackend: PostgreSQL did not answer on port %d: %w%s", s.port, err, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// answers reports why the server on s.port is not this cluster's,
// serving: nil if it is.
func (s *server) answers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var data string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&data); err != nil {
		return err
	}
	if data != s.data() {
		return fmt.Errorf("the server on port %d serves %s, not %s", s.port, data, s.data())
	}
	return nil
}

// stopTimeout bounds the wait for a crashed postmaster to exit.
const stopTimeout = 30 * time.Second

// stop crashes the server: SIGQUIT, PostgreSQL's immediate shutdown, in
// which the postmaster ends every session and exits with no checkpoint,
// so the next start recovers from the write-ahead log, as after a crash.
// It waits for the postmaster to exit.
func (s *server) stop() error {
	if s.cmd == nil {
		return nil
	}
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	quit(cmd)
	select {
	case <-exited:
		return nil
	case <-time.After(stopTimeout):
		kill(cmd)
		<-exited
		return fmt.Errorf("pgbackend: PostgreSQL did not exit within %v of its immediate shutdown; killed", stopTimeout)
	}
}

// restart crashes the server and starts it again on the same data and
// port, and returns once it answers, its recovery done.
func (s *server) restart(ctx context.Context) error {
	if err := s.stop(); err != nil {
		return err
	}
	return s.start(ctx)
}

// close stops the server and removes its directory.
func (s *server) close() error {
	return errors.Join(s.stop(), os.RemoveAll(s.dir))
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logFile())
	return tail("its log", string(b))
}

// tail is the last lines of out, as the end of an error's message.
func tail(what, out string) string {
	out = strings.TrimSpace(out)
	if out == "" {
		return ""
	}
	lines := strings.Split(out, "\n")
	return "; " + what + " ends:\n" + strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgbackend: a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
