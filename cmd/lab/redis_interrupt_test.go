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
func TestRedisRunLeavesNothing(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH (scripts/redis.sh start installs Debian's)")
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"interrupted", []string{"run", "overlap", "--backend", "redis", "--duration", "30s"}, exitInterrupted},
		{"ended", []string{"run", "overlap", "--backend", "redis", "--duration", "500ms"}, 0},
		// Six processes still starting (the Sentinels take seconds to find
		// each other) when the Ctrl-C comes.
		{"sentinel interrupted", []string{"run", "overlap", "--backend", "redis", "--redis-topology", "sentinel", "--resource", "memory", "--duration", "30s"}, exitInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
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
