package virtualtest_test

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

var (
	swarmSeeds      = flag.Int("swarm.seeds", 3, "seeds TestSwarm runs for each contender")
	swarmFirst      = flag.Uint64("swarm.first", 1, "the first seed TestSwarm runs")
	swarmContenders = flag.String("swarm.contenders", "naive,fenced,redsync,redislock,redlock", "comma-separated Redis contenders TestSwarm runs: naive and fenced (the lab's own, on one miniredis), redsync, redislock, redlock")
	swarmScenario   = flag.String("swarm.scenario", "overlap", "the built-in scenario each seed draws its fault mix on")
	swarmDuration   = flag.Duration("swarm.duration", 3*time.Second, "each seed's duration, in virtual time (0: the scenario's)")
	swarmJobs       = flag.Int("swarm.jobs", 0, "bubbles TestSwarm runs at once (0: GOMAXPROCS)")
	swarmReruns     = flag.Int("swarm.reruns", 1, "seeds of each swarm TestSwarm runs again, besides each first counterexample's, to count how often a rerun gives the same digest")
)

// swarmTargets are the targets that run the contenders named, each once:
// naive and fenced run side by side on one target, as lab run runs them.
func swarmTargets(names []string) ([]virtualtest.Target, error) {
	var out []virtualtest.Target
	lab := false
	for _, n := range names {
		switch n {
		case string(history.Naive), string(history.Fenced):
			if !lab {
				out, lab = append(out, virtualtest.Redis()), true
			}
		case registry.Redsync, registry.Redislock, registry.Redlock:
			out = append(out, virtualtest.Contender(n))
		default:
			return nil, fmt.Errorf("-swarm.contenders: %q is not a Redis contender (naive, fenced, redsync, redislock, redlock)", n)
		}
	}
	return out, nil
}

func swarmBase(t *testing.T) spec.Scenario {
	t.Helper()
	base, ok := spec.Builtin(*swarmScenario)
	if !ok {
		t.Fatalf("-swarm.scenario: no built-in %q (%s)", *swarmScenario, strings.Join(spec.BuiltinNames(), ", "))
	}
	if *swarmDuration > 0 {
		base.Duration = *swarmDuration
	}
	return base
}

// reproduce is the command that runs seed again, alone, on contender.
func reproduce(contender string, seed uint64) string {
	d := ""
	if *swarmDuration > 0 {
		d = " -swarm.duration=" + swarmDuration.String()
	}
	return fmt.Sprintf("go test ./realtime/virtualtest/ -run 'TestSwarm$' -v -swarm.contenders=%s -swarm.scenario=%s%s -swarm.first=%d -swarm.seeds=1",
		contender, *swarmScenario, d, seed)
}

// A swarm over seeds for each Redis contender, in virtual time: each seed
// draws its fault mix as lab swarm draws it, and the log says seeds per
// second, each contender's first counterexample with the command that
// reruns its seed, and how often a seed run again gave the same history
// digest. The lab's fenced mode shows none; every run ends as runs do.
func TestSwarm(t *testing.T) {
	names := strings.Split(*swarmContenders, ",")
	targets, err := swarmTargets(names)
	if err != nil {
		t.Fatal(err)
	}
	base := swarmBase(t)
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			r := virtualtest.Swarm(t, base, tg, virtualtest.SwarmConfig{Seeds: *swarmSeeds, FirstSeed: *swarmFirst, Jobs: *swarmJobs})
			t.Log(r)
			for _, e := range r.Errors {
				t.Errorf("seed %d: %v\n  reproduce: %s", e.Seed, e.Err, reproduce(tg.Name, e.Seed))
			}
			for _, m := range r.Modes() {
				if !slices.Contains(names, string(m)) {
					continue
				}
				if f := r.First[m]; f != nil {
					t.Logf("%s's first counterexample, seed %d, reproduce: %s", m, f.Seed, reproduce(string(m), f.Seed))
					if m == history.Fenced {
						t.Errorf("the fenced mode showed a counterexample: %q, %d stale writes", f.Violations, f.StaleWrites)
					}
				}
				if v := r.FirstViolation[m]; v != nil && v.Seed != r.First[m].Seed {
					t.Logf("%s's first violation, seed %d, reproduce: %s", m, v.Seed, reproduce(string(m), v.Seed))
				}
			}
			same, rerun := rerunDigests(t, base, tg, r)
			t.Logf("%s: %d of %d seeds run again gave the same history digest", tg.Name, same, rerun)
		})
	}
}

// rerunDigests runs again the swarm's first -swarm.reruns seeds and each
// mode's first counterexample's and first violation's, and counts those whose rerun gave the
// digest the swarm's run gave.
func rerunDigests(t *testing.T, base spec.Scenario, tg virtualtest.Target, r *virtualtest.SwarmResult) (same, rerun int) {
	t.Helper()
	var seeds []uint64
	for i := range min(*swarmReruns, r.Seeds) {
		seeds = append(seeds, r.FirstSeed+uint64(i))
	}
	for _, f := range slices.Concat(slices.Collect(maps.Values(r.First)), slices.Collect(maps.Values(r.FirstViolation))) {
		if f != nil && !slices.Contains(seeds, f.Seed) {
			seeds = append(seeds, f.Seed)
		}
	}
	for _, seed := range seeds {
		again := virtualtest.Swarm(t, base, tg, virtualtest.SwarmConfig{Seeds: 1, FirstSeed: seed})
		if want := r.Digests[seed]; want == "" {
			continue
		} else if got := again.Digests[seed]; got == want {
			same++
		} else {
			t.Logf("seed %d: digest %s, %s when run again", seed, want, got)
		}
		rerun++
	}
	return same, rerun
}

func setnxTarget(name string, delAny bool) virtualtest.Target {
	return virtualtest.Lock(name, history.Contender{Library: "setnx", Discipline: history.DisciplineNaive, Generations: realtime.GenerationsObserved},
		func(rdb *redis.Client) realtime.Lock { return &setnxLock{rdb: rdb, delAny: delAny} })
}

// The swarm finds a lock that releases by a bare DEL broken (its late
// release frees a lock another agent holds, and answers nil for a lease
// no longer live) within a few seeds, and its seed, run again, shows the
// same finding; the same lock releasing by its own value breaks no
// invariant over as many seeds (its stale writes are the naive
// discipline's).
func TestSwarmCatchesABrokenLock(t *testing.T) {
	base := builtin(t, "duplicates")
	base.Duration = 5 * time.Second
	const seeds = 4
	broken := virtualtest.Swarm(t, base, setnxTarget("setnx-del", true), virtualtest.SwarmConfig{Seeds: seeds, FirstSeed: 1})
	t.Log(broken)
	f := broken.First["setnx-del"]
	if f == nil || len(f.Violations) == 0 || len(broken.Errors) > 0 {
		t.Fatalf("a bare-DEL release: want a violation within %d seeds", seeds)
	}
	again := virtualtest.Swarm(t, base, setnxTarget("setnx-del", true), virtualtest.SwarmConfig{Seeds: 1, FirstSeed: f.Seed})
	if g := again.First["setnx-del"]; g == nil || len(g.Violations) == 0 {
		t.Errorf("seed %d, run again, showed no violation", f.Seed)
	}
	correct := virtualtest.Swarm(t, base, setnxTarget("setnx", false), virtualtest.SwarmConfig{Seeds: seeds, FirstSeed: 1})
	t.Log(correct)
	if correct.FirstViolation["setnx"] != nil || len(correct.Errors) > 0 {
		t.Errorf("the correct lock: %v", correct)
	}
}
