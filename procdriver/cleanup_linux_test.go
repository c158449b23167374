package procdriver_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
)

// children lists the processes whose parent is pid, from /proc.
func children(t *testing.T, pid int) []int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone since the glob
		}
		// pid (comm) state ppid pgrp ...: comm may hold anything but the last ')'.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, child)
		}
	}
	return out
}

// groupsAlive lists the process groups of pgids that still have a process.
func groupsAlive(pgids []int) []int {
	var out []int
	for _, g := range pgids {
		if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
			out = append(out, g)
		}
	}
	return out
}

// Whether a run ends by itself or is interrupted, no child process is left
// when Run returns, and closing the setup leaves no port open and no
// directory behind.
func TestNothingLeftBehind(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel time.Duration
	}{{"run ends", 0}, {"interrupted", 1500 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sc := overlap(3 * time.Second)
			sc.Agents = 2
			s, err := realtime.Open(t.Context(), realtime.Config{Backend: realtime.BackendEtcd, Resource: realtime.StoreSQLite, TempDir: dir}, sc)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			endpoint := s.Backend.(*realtime.Etcd).Endpoints()[0]
			r, err := procdriver.New(s, procdriver.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tc.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.cancel)
				defer cancel()
			}
			res, err := r.Run(ctx)
			if tc.cancel > 0 && !errors.Is(err, context.DeadlineExceeded) || tc.cancel == 0 && err != nil || res == nil {
				t.Fatalf("run: %v", err)
			}
			if left := children(t, os.Getpid()); len(left) > 0 {
				t.Errorf("processes left: %v", left)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(endpoint)
			if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
				c.Close()
				t.Errorf("%s still accepts connections", u.Host)
			}
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Errorf("left behind in %s: %v", dir, left)
			}
		})
	}
}

// A parent ended by SIGTERM ends its children and removes its directories;
// a parent killed outright (SIGKILL, which nothing survives to clean up
// after) still takes its children with it.
func TestParentKilled(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), parentEnv+"="+dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			var kids []int
			for deadline := time.Now().Add(30 * time.Second); len(kids) < 4; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the parent started %d of its 4 agents' processes in 30s", len(kids))
				}
				kids = children(t, cmd.Process.Pid)
			}
			time.Sleep(time.Second) // mid-run
			cmd.Process.Signal(sig)
			cmd.Wait()
			var alive []int
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if alive = groupsAlive(kids); len(alive) == 0 {
					break
				}
			}
			if len(alive) > 0 {
				t.Errorf("process groups of %v still alive after the parent's %v", alive, sig)
				for _, g := range alive {
					syscall.Kill(-g, syscall.SIGKILL)
				}
			}
			if left, _ := os.ReadDir(dir); sig == syscall.SIGTERM && len(left) > 0 {
				t.Errorf("left behind in %s: %v", dir, left)
			}
		})
	}
}
