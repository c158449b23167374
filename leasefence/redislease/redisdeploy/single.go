package redisdeploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Persistence is what a data server keeps on disk.
type Persistence int

const (
	// AOFAlways: every write in the append-only file, fsynced before the
	// reply. A restart, even after SIGKILL, loses nothing answered.
	AOFAlways Persistence = iota
	// AOFEverySec: the append-only file fsynced once a second. A crash
	// loses up to the last second of answered writes.
	AOFEverySec
	// NoPersistence: nothing on disk. A restart comes back empty.
	NoPersistence
)

func (p Persistence) String() string {
	switch p {
	case AOFAlways:
		return "aof-always"
	case AOFEverySec:
		return "aof-everysec"
	case NoPersistence:
		return "none"
	}
	return fmt.Sprintf("Persistence(%d)", int(p))
}

func (p Persistence) check() error {
	if p < AOFAlways || p > NoPersistence {
		return fmt.Errorf("redisdeploy: %v is no Persistence", p)
	}
	return nil
}

func (p Persistence) conf() string {
	switch p {
	case AOFEverySec:
		return "appendonly yes\nappendfsync everysec\n"
	case NoPersistence:
		return "appendonly no\n"
	}
	return "appendonly yes\nappendfsync always\n"
}

// ServerOptions configures a lone server.
type ServerOptions struct {
	// Dir is where the server's directory is made; "" is the system's
	// temporary directory.
	Dir string
	// Persistence; the zero value is AOFAlways.
	Persistence Persistence
}

// StartServer starts a lone data server (no replica, no Sentinel) on a
// free loopback port and a directory of its own, and waits until it
// answers. Its faults are a deployment server's (Pause, Kill, Restart),
// and Stop, RestartEmpty; Close ends it and removes its directory.
func StartServer(ctx context.Context, opts ServerOptions) (*Server, error) {
	if err := opts.Persistence.check(); err != nil {
		return nil, err
	}
	bin, err := lookServer()
	if err != nil {
		return nil, err
	}
	var s *Server
	err = retryTakenPort(func() error {
		s = nil
		root, err := os.MkdirTemp(opts.Dir, "leasefence-redis-")
		if err != nil {
			return fmt.Errorf("redisdeploy: %w", err)
		}
		ports, err := freePorts(1)
		if err != nil {
			os.RemoveAll(root)
			return err
		}
		s, err = newServer(root, "redis", ports[0], bin, nil, serverConf(ports[0], opts.Persistence))
		if err == nil {
			s.owned = root
			err = s.start(ctx)
		}
		if err != nil {
			if s != nil {
				s.Close()
			} else {
				os.RemoveAll(root)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// stopGrace is how long Stop waits for an orderly exit before SIGKILL.
const stopGrace = 10 * time.Second

// Stop ends the process in order (SIGTERM: Redis flushes and fsyncs its
// append-only file, then exits; a paused process is continued first),
// and waits until it is gone, killing it after 10s.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = resume(s.cmd.Process)
	_ = terminate(s.cmd.Process)
	select {
	case <-s.exited:
	case <-time.After(stopGrace):
		_ = kill(s.cmd.Process)
		<-s.exited
	}
	s.cmd, s.paused = nil, false
}

// RestartEmpty kills the process (SIGKILL) and starts it again on the same
// port and configuration with no data: a server that kept nothing on disk
// (or lost its disk) comes back so.
func (s *Server) RestartEmpty(ctx context.Context) error {
	s.Kill()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("redisdeploy: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "redis.conf" && n != "server.log" {
			if err := os.RemoveAll(filepath.Join(s.dir, n)); err != nil {
				return fmt.Errorf("redisdeploy: %w", err)
			}
		}
	}
	return s.start(ctx)
}

// Close kills the process; for a lone server (StartServer) it also
// removes its directory. It may be called more than once.
func (s *Server) Close() error {
	s.Kill()
	if s.owned == "" {
		return nil
	}
	return removeAll(s.owned)
}
