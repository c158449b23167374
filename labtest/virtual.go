package labtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/spec"
)

// CheckVirtual puts the lock newLock builds through the default battery
// (Check's) in virtual time: the same runner, agents, faults and checker
// as Check, inside a testing/synctest bubble, where time advances only
// when every goroutine of the run waits, so the battery's half minute of
// faults takes a fraction of a second. newLock is called inside the
// bubble, once per scenario, with a client of an in-memory Redis
// (miniredis, over an in-memory connection, its TTLs on the bubble's
// clock): the lock must reach Redis through that client alone.
//
// Each scenario is judged as Check judges it, with the same findings,
// failures and history file; the first that fails stops the battery, and
// its failure names the scenario and the seed and says how often the
// seed, run again, failed again (reruns of a seed replay its fault mix,
// but what the lock does on goroutines of its own within one virtual
// instant is the Go scheduler's). Options are Check's; Seeds runs the
// battery over many seeds of drawn fault mixes. The resources are kept in
// memory inside the bubble: Store is refused. Each scenario runs to its
// end, KeepGoing or not: stopping a scenario at its first counterexample
// saves seconds in real time, and a few milliseconds here.
//
// A lock that blocks the bubble for good (a sync.Mutex held across a
// wait on the clock, a socket to a real address) is abandoned once the
// run's clock stood still for virtualtest.DefaultWatchdog of wall time; a
// call that blocks heeding no context, a grace (virtual) after the run's
// end; a call that panics is the library's error of the agent that made
// it. Each fails the test naming the agent, the call, the scenario and the
// seed, with the history recorded until then; none hangs the test binary
// (a blocked goroutine stays blocked until the binary exits).
func CheckVirtual(t *testing.T, newLock func(rdb *redis.Client) Lock, opts ...Option) *BatteryResult {
	t.Helper()
	c := newConfig(opts)
	switch {
	case newLock == nil:
		t.Fatalf("labtest: CheckVirtual: a nil newLock")
		return nil
	case c.store != nil:
		t.Fatalf("labtest: CheckVirtual keeps the resources in memory, inside its bubble: Store is for Run and Check")
		return nil
	}
	if c.seeds <= 0 {
		return checkBattery(t, c, func(sc spec.Scenario, c config) *Result { return runVirtual(t, sc, newLock, c) })
	}
	return checkSeeds(t, c, newLock)
}

// checkSeeds runs the battery over c.seeds seeds of drawn fault mixes,
// stopping at the first that fails, and judges what the seeds left
// inconclusive over them all: one seed's mix may exercise less than
// another's.
func checkSeeds(t *testing.T, c config, newLock func(*redis.Client) Lock) *BatteryResult {
	t.Helper()
	all := &BatteryResult{}
	var runs []history.BatteryRun
	each := c
	each.inconclusive = true // judged over every seed, below
	for seed := uint64(1); seed <= uint64(c.seeds); seed++ {
		t.Logf("labtest: seed %d of %d: each scenario's fault mix drawn from it", seed, c.seeds)
		res := checkBattery(t, each, func(sc spec.Scenario, c config) *Result {
			sc = drawn(sc, seed)
			r := runVirtual(t, sc, newLock, c)
			if r != nil {
				runs = append(runs, history.BatteryRun{Scenario: fmt.Sprintf("%s (seed %d)", sc.Name, seed), Report: r.Report})
			}
			return r
		})
		if res == nil {
			return nil // refused: t has failed
		}
		all.Scenarios = append(all.Scenarios, res.Scenarios...)
		all.LeftOut = res.LeftOut
		if res.Failed {
			all.Failed = true
			t.Logf("labtest: the seeds stopped at seed %d, the first that failed", seed)
			break
		}
	}
	return judgeBattery(t, c, runs, all)
}

// Seeds runs CheckVirtual's battery over n seeds of drawn fault mixes
// (seeds 1 to n), stopping at the first that fails. Each seed draws every
// scenario's fault knobs (message loss, duplication and delays, the
// agents' clock drift, the long tail of the stalls) as lab swarm draws
// them, from the same ranges; the knobs a user's lock cannot play (a
// restart of its server, the lab coordinator's push) stay the
// scenario's. The failure names the seed; Seeds(n) reaches it again.
func Seeds(n int) Option { return func(c *config) { c.seeds = n } }

// drawn is sc with the fault mix lab swarm draws for seed, but for the
// knobs a user's lock cannot play.
func drawn(sc spec.Scenario, seed uint64) spec.Scenario {
	ranges := harness.DefaultSwarmRanges
	ranges.Fixed = virtualtest.SwarmFixed(sc, virtualtest.Target{Plays: func(sc spec.Scenario) error { return checkUserLock("lock", sc) }})
	return harness.SwarmScenario(sc, ranges, seed)
}

// reruns is how many times a failed seed is run again, to say how often
// it reproduces its failure.
const reruns = 5

// runVirtual runs sc on the lock newLock builds, in a bubble of its own,
// and judges it as runScenario does; a failed run is rerun (reruns times)
// to say how often its seed fails again.
func runVirtual(t *testing.T, sc spec.Scenario, newLock func(*redis.Client) Lock, c config) *Result {
	t.Helper()
	res, o, err := runInBubble(t, sc, newLock, c)
	if err != nil {
		t.Fatalf("labtest: %v", err)
		return nil
	}
	report(t, sc, res, c)
	if !res.Failed {
		return res
	}
	if res.NeverReturned != nil && res.NeverReturned.Stalled {
		t.Logf("labtest: seed %d of %s is not rerun: a rerun would block another bubble for good", sc.Seed, sc.Name)
		return res
	}
	failed, same := 0, 0
	for range reruns {
		again, ao, err := runInBubble(t, sc, newLock, c)
		if err != nil {
			t.Errorf("labtest: rerunning seed %d of %s: %v", sc.Seed, sc.Name, err)
			return res
		}
		if again.Failed {
			failed++
		}
		if ao.Digest() == o.Digest() {
			same++
		}
	}
	t.Errorf("labtest: seed %d of %s (%s) failed again in %d of %d reruns (%d of them recorded the same history)",
		sc.Seed, sc.Name, sc.Description, failed, reruns, same)
	return res
}

// runInBubble runs sc on the lock newLock builds in a bubble, probing it
// there first, and returns the run's Result (its history file written
// when it failed) and outcome.
func runInBubble(t *testing.T, sc spec.Scenario, newLock func(*redis.Client) Lock, c config) (*Result, *virtualtest.Outcome, error) {
	name := history.Mode(cmp(c.name, "lock"))
	// What opening the run is doing, for a failure while it stands still.
	var opening atomic.Pointer[string]
	doing := func(what string) { opening.Store(&what) }
	target := virtualtest.Target{Name: string(name), Open: func(t *testing.T, sc spec.Scenario) (realtime.Options, error) {
		rdb := virtualtest.Client(t, virtualtest.Miniredis(t), false)
		doing("newLock")
		lock, err := built(newLock, rdb)
		if err != nil {
			return realtime.Options{}, err
		}
		doing("the probe's Acquire of " + ProbeResource + " (and its Release)")
		info, err := contender(t.Context(), lock, sc, c)
		if err != nil {
			return realtime.Options{}, err
		}
		doing("")
		backend := &realtime.Contender{Info: info, New: func(context.Context, history.Mode) (Lock, error) { return lock, nil }}
		t.Cleanup(func() { backend.Close() })
		return realtime.Options{Modes: []history.Mode{name}, Backend: backend}, nil
	}}
	o := virtualtest.Run(t, sc, target, virtualtest.Config{Grace: c.grace})
	var stuck *realtime.NeverReturnedError
	if o.Err != nil && !errors.As(o.Err, &stuck) {
		where := fmt.Sprintf("%s on %s, seed %d", name, sc.Name, sc.Seed)
		if what := opening.Load(); o.Result == nil && what != nil && *what != "" {
			where += ", during " + *what
		}
		err := fmt.Errorf("%s: %w", where, o.Err)
		if _, real := errors.AsType[*net.OpError](o.Err); real {
			err = fmt.Errorf("%w (the lock reached the real network: in the bubble it must reach Redis through the client newLock is given)", err)
		}
		if o.Result == nil {
			err = fmt.Errorf("%w; no run was made, so no history was kept", err)
		}
		return nil, o, err
	}
	res := &Result{Report: o.Result.Modes[name], Contender: o.Header.Contender(name), NeverReturned: stuck}
	res.MutualExclusion = res.counterexamples(history.MutualExclusionViolation)
	res.Failed = stuck != nil || len(res.failures(c)) > 0
	if !res.Failed {
		return res, o, nil
	}
	data, err := o.History()
	if err != nil {
		return nil, o, err
	}
	res.HistoryPath = filepath.Join(cmp(c.dir, os.TempDir()), fmt.Sprintf("labtest-%s-seed%d-%s.jsonl", sc.Name, sc.Seed, o.Digest()))
	return res, o, os.WriteFile(res.HistoryPath, data, 0o644)
}

// built is newLock(rdb), a panic of newLock's an error.
func built(newLock func(*redis.Client) Lock, rdb *redis.Client) (lock Lock, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("newLock panicked: %v", p)
		}
	}()
	if lock = newLock(rdb); lock == nil {
		return nil, errors.New("newLock returned a nil Lock")
	}
	return lock, nil
}
