package procdriver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
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

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/etcdbackend"
	"github.com/leasefence/lab/registry"
)

// children lists the processes whose parent is pid, from /proc.
//
// A test that lists the test process's own children (os.Getpid()) must
// not call t.Parallel: the sequential tests run before any parallel one
// starts, so every child it finds is one its own run left.
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
			s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Etcd, Resource: registry.SQLite, TempDir: dir}, sc)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			endpoint := s.Backend.(*etcdbackend.Etcd).Endpoints()[0]
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

// processAlive reports whether pid is a process that has not exited (a
// zombie no one reaped has).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// A parent ended by SIGTERM or SIGINT ends its children and removes its
// directories; a parent killed outright (SIGKILL, which nothing survives
// to clean up after) still takes its children with it, and leaves only
// directories marked with its own, dead, process, which the next run
// removes. With library contenders too: their redis-servers and embedded
// etcd go with the parent.
func TestParentKilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		modes string // parentModesEnv
		kids  int    // the parent's children once it runs
		sigs  []syscall.Signal
	}{
		{"lab's own", "", 4, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}},
		// 2 agents in each of 4 modes, and redis-servers: the backend's
		// one, which redsync shares, and redlock's three.
		{"library contenders", strings.Join([]string{string(history.Fenced), registry.Redsync, registry.Redlock, registry.EtcdMutex}, ","), 8 + 4,
			[]syscall.Signal{syscall.SIGINT, syscall.SIGKILL}},
	} {
		for _, sig := range tc.sigs {
			t.Run(tc.name+"/"+sig.String(), func(t *testing.T) {
				t.Parallel()
				if tc.modes != "" {
					if _, err := exec.LookPath("redis-server"); err != nil {
						t.Skip("no redis-server (scripts/redis.sh start installs it)")
					}
				}
				parentKilled(t, tc.modes, tc.kids, sig)
			})
		}
	}
}

func parentKilled(t *testing.T, modes string, want int, sig syscall.Signal) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), parentEnv+"="+dir, parentModesEnv+"="+modes)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	running := make(chan struct{})
	go func() {
		out := bufio.NewScanner(stdout)
		for out.Scan() {
			if out.Text() == grantedLine {
				close(running)
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	var kids []int
	for deadline := time.Now().Add(60 * time.Second); len(kids) < want; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the parent started %d of its %d processes in 60s%s", len(kids), want, stderr.String())
		}
		kids = children(t, cmd.Process.Pid)
	}
	select { // mid-run: a lease was granted
	case <-running:
	case <-time.After(60 * time.Second):
		t.Fatalf("the parent's run granted no lease in 60s%s", stderr.String())
	}
	cmd.Process.Signal(sig)
	cmd.Wait()
	var alive []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		alive = alive[:0]
		for _, k := range kids {
			if processAlive(k) {
				alive = append(alive, k)
			}
		}
		if len(alive) == 0 {
			break
		}
	}
	if len(alive) > 0 {
		t.Errorf("processes %v still alive after the parent's %v", alive, sig)
		for _, k := range alive {
			syscall.Kill(-k, syscall.SIGKILL)
			syscall.Kill(k, syscall.SIGKILL)
		}
	}
	left, _ := os.ReadDir(dir)
	if sig == syscall.SIGKILL {
		// What a killed parent could not remove, the next run does.
		for _, e := range left {
			scratch.RemoveDead(dir, e.Name())
		}
		left, _ = os.ReadDir(dir)
	}
	if len(left) > 0 {
		t.Errorf("left behind in %s after the parent's %v: %v", dir, sig, left)
	}
}
