package realtime_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/realtime/sqlitestore"
)

// The data a run killed by SIGKILL left behind (here: a SQLite store's
// directory whose owner is gone) is removed when the next store of its
// kind is made; the new one is marked with its owner, and Close removes it.
func TestStoreRemovesDeadRunsData(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("owners' start times are read from /proc")
	}
	parent := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(parent, "leasefence-sqlite-killed")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, scratch.OwnerFile), []byte(strconv.Itoa(cmd.Process.Pid)+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "fenced.db"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.NewSQLiteStore(parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the dead run's directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), scratch.OwnerFile)); err != nil {
		t.Errorf("the new store's directory has no owner: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", s.Dir(), err)
	}
}
