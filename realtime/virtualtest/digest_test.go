package virtualtest_test

import (
	"errors"
	"flag"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/spec"
)

var (
	runs      = flag.Int("virtual.runs", 3, "runs of each built-in scenario that TestDigestStable compares")
	targets   = flag.String("virtual.targets", "memory", "comma-separated targets TestDigestStable runs: memory, redis, or a contender of realtime/redislocks")
	scenarios = flag.String("virtual.scenarios", "", "comma-separated built-in scenarios TestDigestStable runs (all for none)")
	longest   = flag.Duration("virtual.longest", 30*time.Second, "the longest scenario TestDigestStable runs: a longer built-in is cut to it (0: none is)")
)

func target(name string) virtualtest.Target {
	if name == "memory" {
		return virtualtest.Memory()
	}
	if name == "redis" {
		return virtualtest.Redis()
	}
	return virtualtest.Contender(name)
}

// A seed gives one history in virtual time, on every built-in scenario:
// the timers of one instant fire in one order, each left to run until it
// waits (without that, contend's agents reach the lock at t=0 in the
// scheduler's order, and 5 runs give about 4 histories).
func TestDigestStable(t *testing.T) {
	names := spec.BuiltinNames()
	if *scenarios != "" {
		names = strings.Split(*scenarios, ",")
	}
	for _, tg := range strings.Split(*targets, ",") {
		for _, name := range names {
			digestStable(t, target(tg), name)
		}
	}
}

func digestStable(t *testing.T, tg virtualtest.Target, name string) {
	sc, _ := spec.Builtin(name)
	if *longest > 0 && sc.Duration > *longest {
		sc.Duration = *longest // crowd's 2 minutes are most of the test's time under -race
	}
	digests := map[string]int{}
	var wall []string
	for range *runs {
		o := virtualtest.Run(t, sc, tg, virtualtest.Config{})
		if errors.Is(o.Err, virtualtest.ErrUnplayable) {
			t.Logf("%s on %s: %v", name, tg.Name, o.Err)
			return
		}
		if o.Err != nil {
			t.Errorf("%s on %s: %v", name, tg.Name, o.Err)
			return
		}
		digests[o.Digest()]++
		wall = append(wall, o.Wall.Round(time.Millisecond).String())
	}
	if len(digests) > 1 {
		t.Errorf("%s on %s: %d histories in %d runs of seed %d", name, tg.Name, len(digests), *runs, sc.Seed)
	}
	t.Logf("%s on %s (%s): %d histories in %d runs %v, wall %v", name, tg.Name, sc.Duration, len(digests), *runs, slices.Sorted(maps.Keys(digests)), wall)
}
