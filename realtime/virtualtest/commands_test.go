package virtualtest_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/commands.golden from what the contenders sent")

// The commands each Redis contender sends, its Lua scripts' included,
// over two seeds of lost-replies with leases held long enough to be
// renewed (acquires, refusals, renewals, releases, takeovers and lost
// replies retried, each counted): every one is a command miniredis
// implements, and the list is testdata/commands.golden, which
// docs/swarm.md quotes.
func TestCommandsMiniredisImplements(t *testing.T) {
	base := builtin(t, "lost-replies")
	base.Duration = 5 * time.Second
	base.Agent.WorkGap = spec.Uniform(200*time.Millisecond, 400*time.Millisecond) // 3 writes: past the renewal at half the TTL
	var got strings.Builder
	for _, tg := range []virtualtest.Target{virtualtest.Redis(), virtualtest.Contender(registry.Redsync),
		virtualtest.Contender(registry.Redislock), virtualtest.Contender(registry.Redlock)} {
		var cmds virtualtest.Commands
		exercised := map[history.Mode]*[4]int{} // renewals, releases, takeovers, lost replies retried
		for seed := uint64(1); seed <= 2; seed++ {
			// No restart (the server a restart starts anew is not counted),
			// and what the target cannot play kept as base has it.
			ranges := harness.DefaultSwarmRanges
			ranges.Fixed = append(virtualtest.SwarmFixed(base, tg), harness.SwarmRestarts)
			o := virtualtest.Run(t, harness.SwarmScenario(base, ranges, seed), tg, virtualtest.Config{Commands: &cmds})
			if o.Err != nil {
				t.Fatalf("%s, seed %d: %v", tg.Name, seed, o.Err)
			}
			for m, rep := range o.Result.Modes {
				if exercised[m] == nil {
					exercised[m] = new([4]int)
				}
				n, e := rep.Findings.Coverage.Counts, exercised[m]
				e[0], e[1], e[2], e[3] = e[0]+n.Renewals, e[1]+n.Releases, e[2]+n.Takeovers, e[3]+n.LostRepliesRetried
			}
		}
		for m, e := range exercised {
			if slices.Contains(e[:], 0) {
				t.Errorf("%s: the runs did not exercise every call (renewals, releases, takeovers, lost replies retried: %v)", m, *e)
			}
		}
		if missing := cmds.Unimplemented(); len(missing) > 0 {
			t.Errorf("%s sent commands miniredis does not implement: %v", tg.Name, missing)
		}
		fmt.Fprintf(&got, "%-9s  %s\n", tg.Name, strings.Join(cmds.Names(), " "))
	}
	golden := filepath.Join("testdata", "commands.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("the contenders sent (go test -run TestCommandsMiniredisImplements -update to accept):\n%s\nwant (%s):\n%s", got.String(), golden, want)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "swarm.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string // the doc's lines, unindented: the list is quoted in a list item
	for l := range strings.Lines(string(doc)) {
		lines = append(lines, strings.TrimLeft(l, " "))
	}
	if !strings.Contains(strings.Join(lines, ""), string(want)) {
		t.Errorf("docs/swarm.md does not quote %s:\n%s", golden, want)
	}
}

// debugLock is setnxLock that first sends DEBUG SLEEP 0, a command
// miniredis does not implement, as a lock relying on one would.
type debugLock struct{ setnxLock }

func (l *debugLock) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (realtime.Lease, error) {
	l.rdb.Do(ctx, "DEBUG", "SLEEP", "0") // answered "unknown command"
	return l.setnxLock.Acquire(ctx, resource, holder, ttl)
}

// A command miniredis does not implement is named, not counted as one
// the lock may rely on.
func TestCommandsNamesWhatMiniredisLacks(t *testing.T) {
	var cmds virtualtest.Commands
	tg := virtualtest.Lock("debug", history.Contender{Library: "setnx", Discipline: history.DisciplineNaive, Generations: realtime.GenerationsObserved},
		func(rdb *redis.Client) realtime.Lock { return &debugLock{setnxLock{rdb: rdb}} })
	if o := virtualtest.Run(t, builtin(t, "gap"), tg, virtualtest.Config{Commands: &cmds}); o.Err != nil {
		t.Fatal(o.Err)
	}
	if got := cmds.Unimplemented(); !slices.Equal(got, []string{"DEBUG"}) || cmds.Count("SET") == 0 {
		t.Errorf("unimplemented %v, %d SETs of %v: want DEBUG alone, and the SETs counted", got, cmds.Count("SET"), cmds.Names())
	}
}
