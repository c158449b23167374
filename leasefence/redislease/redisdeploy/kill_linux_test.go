package redisdeploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
)

// live lists the processes whose title names addr, but for the dead and
// the dying (a zombie, or one with a SIGKILL pending, which a write to
// disk may hold up for a moment): a redis-server and any child it forked
// (an AOF rewrite titles itself "redis-aof-rewrite <addr>").
func live(t *testing.T, addr string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, d := range dirs {
		title, err := os.ReadFile(filepath.Join(d, "cmdline"))
		stat, serr := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil || serr != nil || !bytes.Contains(title, []byte(addr)) {
			continue
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) || killPending(d) {
			continue
		}
		found = append(found, fmt.Sprintf("%s: %s", filepath.Base(d), strings.TrimRight(string(bytes.ReplaceAll(title, []byte{0}, []byte{' '})), " ")))
	}
	return found
}

// killPending reports whether the process at /proc dir d has a SIGKILL
// pending, for it or its thread group.
func killPending(d string) bool {
	status, err := os.ReadFile(filepath.Join(d, "status"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, mask, ok := strings.Cut(line, ":")
		if name != "SigPnd" && name != "ShdPnd" || !ok {
			continue
		}
		if bits, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64); err == nil && bits&(1<<(9-1)) != 0 {
			return true
		}
	}
	return false
}

// A kill ends the server's children with it: an AOF rewrite in progress
// does not go on writing into the server's directory after it.
func TestKillEndsTheServersChildren(t *testing.T) {
	t.Parallel()
	s := startLone(t, redisdeploy.AOFEverySec)
	c := s.Client()
	defer c.Close()
	ctx := t.Context()
	// Enough data that the rewrite's child runs for a while.
	for batch := range 40 {
		p := c.Pipeline()
		for i := range 1000 {
			p.Set(ctx, fmt.Sprintf("k%d-%d", batch, i), strings.Repeat("v", 4000), 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Redis may have begun one on its own, as the file grew.
	if err := c.BgRewriteAOF(ctx).Err(); err != nil && !strings.Contains(err.Error(), "already in progress") {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(live(t, s.Addr())) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := len(live(t, s.Addr())); n < 2 {
		t.Skipf("the rewrite's child was not seen running (%d processes): nothing to kill", n)
	}
	s.Kill()
	// The signal is pending as soon as kill returns; give the scheduler a
	// moment, far below the time the child takes to write the file.
	deadline = time.Now().Add(100 * time.Millisecond)
	for len(live(t, s.Addr())) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := live(t, s.Addr()); len(left) > 0 {
		t.Errorf("alive after Kill: %v", left)
	}
}
