package virtualtest_test

import (
	"flag"
	"testing"

	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/spec"
)

var runs = flag.Int("virtual.runs", 3, "runs of each built-in scenario that TestDigestStable compares")

// A seed gives one history in virtual time, on every built-in scenario:
// the timers of one instant fire in one order, each left to run until it
// waits (without that, contend's agents reach the lock at t=0 in the
// scheduler's order, and 5 runs give about 4 histories).
func TestDigestStable(t *testing.T) {
	for _, name := range spec.BuiltinNames() {
		sc, _ := spec.Builtin(name)
		digests := map[string]int{}
		var wall []string
		for range *runs {
			o := virtualtest.Run(t, sc, virtualtest.Memory(), virtualtest.Config{})
			if o.Err != nil {
				t.Errorf("%s: %v", name, o.Err)
				break
			}
			digests[o.Digest()]++
			wall = append(wall, o.Wall.Round(1e6).String())
		}
		if len(digests) > 1 {
			t.Errorf("%s: %d histories in %d runs of seed %d", name, len(digests), *runs, sc.Seed)
		}
		t.Logf("%s: %d histories in %d runs, wall %v", name, len(digests), *runs, wall)
	}
}
