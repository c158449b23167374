package scratch

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// A directory whose owner died (a run killed by SIGKILL) is removed by the
// next one made of its kind; one whose owner lives, one whose pid now
// belongs to another process (its start time differs), and one no run
// owns are told apart.
func TestMkdirTempRemovesTheDeadOwners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("start times are read from /proc")
	}
	parent := t.TempDir()
	dead := deadPid(t)
	dirs := map[string]string{
		"leasefence-etcd-dead":    strconv.Itoa(dead) + " 12345",
		"leasefence-etcd-alive":   self(),
		"leasefence-etcd-reused":  strconv.Itoa(os.Getpid()) + " 1",
		"leasefence-etcd-nopid":   strconv.Itoa(dead),
		"leasefence-etcd-unowned": "",
		"leasefence-redis-dead":   strconv.Itoa(dead) + " 12345",
	}
	for name, owner := range dirs {
		d := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(d, "member", "wal"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, OwnerFile), []byte(owner+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	made, err := MkdirTemp(parent, "leasefence-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(made, OwnerFile)); err != nil || string(b) != self()+"\n" {
		t.Errorf("the new directory's owner file: %q, %v", b, err)
	}
	for name, want := range map[string]bool{"leasefence-etcd-dead": false, "leasefence-etcd-alive": true,
		"leasefence-etcd-reused": false, "leasefence-etcd-nopid": false, "leasefence-etcd-unowned": true,
		"leasefence-redis-dead": true} {
		_, err := os.Stat(filepath.Join(parent, name))
		if got := err == nil; got != want {
			t.Errorf("%s: kept %v, want %v", name, got, want)
		}
	}
	if removed := RemoveDead(parent, "leasefence-redis-"); len(removed) != 1 {
		t.Errorf("RemoveDead of redis: %q", removed)
	}
}

// deadPid is the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
