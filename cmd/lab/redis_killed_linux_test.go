package main

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/internal/scratch"
)

// A lab killed outright (SIGKILL: nothing of it runs to clean up) in the
// middle of a run on the sentinel topology takes its six processes, three
// redis-servers and three Sentinels, with it (they die with their parent),
// and leaves only a directory marked with its own dead process, which the
// next run removes.
func TestRedisSentinelRunKilledLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis deployment")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH (scripts/redis.sh start installs Debian's)")
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "run", "overlap", "--backend", "redis", "--redis-topology", "sentinel",
		"--resource", "memory", "--duration", "60s")
	cmd.Env = append(os.Environ(), runAsLab+"=1", "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	const processes = 6
	for deadline := time.Now().Add(60 * time.Second); len(processesIn(tmp)) < processes; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lab started %d of its %d Redis processes in 60s: %v\n%s", len(processesIn(tmp)), processes, processesIn(tmp), stderr.String())
		}
	}
	time.Sleep(time.Second) // mid-run
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	left := processesIn(tmp)
	for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left = processesIn(tmp)
	}
	if len(left) > 0 {
		t.Errorf("still running 10s after the lab's SIGKILL: %v", left)
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		scratch.RemoveDead(tmp, e.Name())
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("left behind in TMPDIR, and not removed as a dead run's: %v", entries)
	}
}
