package sqllease_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// TestSQLiteAcrossProcesses: three processes (this test binary run again)
// contend for one resource of one SQLite file, four goroutines each on a
// handle of their own, while the parent waits. Each child checks what one
// process can see (contend: a lease superseded before its release, fences
// out of order); the parent checks that the fences granted across all of
// them are distinct.
func TestSQLiteAcrossProcesses(t *testing.T) {
	if path := os.Getenv("SQLLEASE_CHILD_DB"); path != "" {
		d := &sqliteDB{&sqltest.SQLite{Path: path}}
		coord, err := sqllease.New(d.handle(t), sqllease.Options{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		fences, err := contendFences(t.Context(), []*sqllease.Coordinator{coord}, 4, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fences {
			fmt.Printf("granted fence %d\n", f)
		}
		return
	}
	t.Parallel()
	d := &sqliteDB{sqltest.NewSQLite(t, "leases.db")}
	path := d.Path
	newCoordinator(t, d.handle(t), sqllease.Options{TTL: time.Minute})
	const children = 3
	outs := make([][]byte, children)
	errs := make([]error, children)
	var wg sync.WaitGroup
	for i := range children {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSQLiteAcrossProcesses$", "-test.v")
			cmd.Env = append(os.Environ(), "SQLLEASE_CHILD_DB="+path)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for i := range children {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
		n := 0
		for line := range strings.Lines(string(outs[i])) {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "granted fence "); ok {
				if j, dup := seen[f]; dup {
					t.Fatalf("fence %s granted in process %d and in process %d", f, j, i)
				}
				seen[f] = i
				n++
			}
		}
		if n != 40 {
			t.Fatalf("process %d reported %d grants, want 40:\n%s", i, n, outs[i])
		}
	}
}
