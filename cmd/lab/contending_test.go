package main

import (
	"strings"
	"testing"
)

// A library's lock keeps its own time on its own server: a drift of the
// lab's coordinator is refused for it before anything runs, with exit 2
// and one line naming the contender and the flag. Played, it skewed the
// lab's dating of the lock's deadlines: this command had redsync and
// redislock "violate" mutual exclusion at every handover.
func TestCoordinatorDriftRefusedForALibrarysLock(t *testing.T) {
	code, stdout, stderr := runLab("run", "overlap", "--contenders", "redsync,redislock,fenced", "--backend", "memory",
		"--coordinator-drift-ppm", "-100000", "--duration", "2s")
	first, _, _ := strings.Cut(stderr, "\n")
	if code != exitUsage || stdout != "" || !strings.Contains(first, "contender redsync: cannot play the lab coordinator's clock drift, --coordinator-drift-ppm") {
		t.Errorf("exit %d, stdout %q, stderr %q: want exit %d naming redsync and --coordinator-drift-ppm", code, stdout, stderr, exitUsage)
	}
	// The lab's own contenders keep playing it: it is their coordinator's.
	if code, _, stderr := runLab("run", "overlap", "--contenders", "fenced", "--backend", "memory",
		"--coordinator-drift-ppm", "-100000", "--duration", "300ms", "--json"); code != exitOK {
		t.Errorf("fenced with the coordinator drifted: exit %d, %s", code, stderr)
	}
}
