package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Ctrl-C in the middle of a run on Redis stops the redis-server the lab
// started and removes its directory before the command returns, as the end
// of a run does.
//
// The run that ends has no deadline: it ends on its own, however long the
// server takes to start on a loaded machine (a deadline once cut it short
// there, and the test failed an interrupted run's exit code). It runs 2s
// so that both modes write, or the run is vacuous (exit 1): the first
// write came at 0.09-0.24s in eight runs at load 15, and in one run of 0.5s
// with three more beside it, none came.
func TestRedisRunLeavesNothing(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH (scripts/redis.sh start installs Debian's)")
	}
	for _, tc := range []struct {
		name string
		args []string
		// interrupt is when the Ctrl-C comes; 0 for none.
		interrupt time.Duration
		code      int
	}{
		{"interrupted", []string{"run", "overlap", "--backend", "redis", "--duration", "30s"}, 1500 * time.Millisecond, exitInterrupted},
		{"ended", []string{"run", "overlap", "--backend", "redis", "--duration", "2s"}, 0, 0},
		// Six processes still starting (the Sentinels take seconds to find
		// each other) when the Ctrl-C comes.
		{"sentinel interrupted", []string{"run", "overlap", "--backend", "redis", "--redis-topology", "sentinel", "--resource", "memory", "--duration", "30s"}, 1500 * time.Millisecond, exitInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			ctx := t.Context()
			if tc.interrupt > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.interrupt)
				defer cancel()
			}
			a, stdout, stderr := testApp()
			if code := a.main(ctx, tc.args); code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("left behind in TMPDIR: %v", left)
			}
			if procs := processesIn(tmp); len(procs) > 0 {
				t.Errorf("still running in TMPDIR: %v", procs)
			}
		})
	}
}

// processesIn lists the processes whose working directory is under dir
// (Linux's /proc; nothing elsewhere).
func processesIn(dir string) []string {
	var out []string
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		if cwd, err := os.Readlink(filepath.Join(p, "cwd")); err == nil && strings.HasPrefix(cwd, dir) {
			out = append(out, filepath.Base(p)+" in "+cwd)
		}
	}
	return out
}
