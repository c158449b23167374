package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// cancelAfter is a context that reports itself cancelled from its n-th
// Err call on: a Ctrl-C that arrives at a chosen point of a run, the same
// point every time.
type cancelAfter struct {
	context.Context
	mu    sync.Mutex
	left  int
	done  chan struct{}
	fired bool
}

func newCancelAfter(n int) *cancelAfter {
	return &cancelAfter{Context: context.Background(), left: n, done: make(chan struct{})}
}

func (c *cancelAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left > 0 {
		c.left--
		return nil
	}
	if !c.fired {
		c.fired = true
		close(c.done)
	}
	return context.Canceled
}

func (c *cancelAfter) Done() <-chan struct{} { return c.done }

// testApp is the command with captured streams and no terminal.
func testApp() (*app, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &app{stdout: &stdout, stderr: &stderr}, &stdout, &stderr
}

// TestInterruptedRunKeepsWhatItHad checks that a run stopped by Ctrl-C
// still prints its report, marked, writes its page and flushes its trace,
// and exits 130.
func TestInterruptedRunKeepsWhatItHad(t *testing.T) {
	dir := t.TempDir()
	trace, page := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "run.html")
	a, stdout, stderr := testApp()
	// The simulator looks at ctx every 4096 events: this stops the run
	// after some tens of thousands of events of the crowd.
	code := a.main(newCancelAfter(8), []string{"run", "crowd", "--duration", "1h", "--trace", "file=" + trace, "--html", page})
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, exitInterrupted, stderr)
	}
	if !strings.Contains(stdout.String(), "INTERRUPTED at ") || !strings.Contains(stdout.String(), "The naive mode landed") {
		t.Errorf("the report of what ran is missing:\n%s", stdout)
	}
	if !strings.Contains(stderr.String(), "lab run: interrupted at ") {
		t.Errorf("stderr: %s", stderr)
	}
	for _, f := range []string{trace, page} {
		info, err := os.Stat(f)
		if err != nil || info.Size() == 0 {
			t.Errorf("%s was not written: %v", f, err)
		}
	}
	if b, _ := os.ReadFile(page); !bytes.Contains(b, []byte("Interrupted at")) {
		t.Error("the page does not say the run was interrupted")
	}
}

func TestInterruptedFixtures(t *testing.T) {
	a, stdout, _ := testApp()
	code := a.main(newCancelAfter(0), []string{"fixtures", "../../fixtures"})
	if code != exitInterrupted || !strings.Contains(stdout.String(), "0 passed, 0 failed") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}

// TestInterruptedEtcdRunLeavesNothing stops a run on an embedded etcd with
// Ctrl-C: it reports what ran, exits 130, and leaves no temporary
// directory behind (the members are in this process: they stopped with
// the setup).
func TestInterruptedEtcdRunLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, stdout, stderr := testApp()
	done := make(chan int)
	go func() {
		done <- a.main(ctx, []string{"run", "overlap", "--backend", "etcd", "--resource", "sqlite", "--duration", "1m"})
	}()
	// Cancel once the run has begun: its etcd directory exists.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if entries, _ := os.ReadDir(tmp); len(entries) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(time.Second)
	cancel()
	if code := <-done; code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, exitInterrupted, stderr)
	}
	if !strings.Contains(stdout.String(), "INTERRUPTED at ") || !strings.Contains(stdout.String(), "backend etcd (embedded, 1 member") {
		t.Errorf("the report of what ran is missing:\n%s", stdout)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("left behind in TMPDIR: %v", entries)
	}
}
