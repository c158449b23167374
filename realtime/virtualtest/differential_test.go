package virtualtest_test

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/redisbackend"
	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// kind is what a verdict says in kind: a mode's lock and writes findings.
type kind struct{ lock, writes string }

func kindOf(rep *history.Report) kind {
	return kind{lock: rep.Findings.Lock.Verdict, writes: rep.Findings.Writes.Verdict}
}

// stalls is overlap on a 250 ms TTL for 4 s, 2 writes in 5 stalled 1.6
// to 3 TTLs: leases taken over under stalled holders twice a second or
// so, far from any timing bound, so that in real time too the naive
// disciplines land stale writes (5 to 9 a run on a loopback Redis, 9 in
// virtual time; none would make their writes finding held) and the gate
// refuses the fenced mode's. It keeps
// overlap's one resource: on real Redis, grants of several resources in
// one instant are recorded out of their fences' order, which the checker
// reads as fences reused (lab run contend --backend redis shows it).
func stalls(t *testing.T) spec.Scenario {
	sc := builtin(t, "overlap")
	sc.Name, sc.Description = "stalls", "overlap on a 250ms TTL for 4s, 2 writes in 5 stalled past the TTL"
	sc.Duration, sc.TTL = 4*time.Second, 250*time.Millisecond
	sc.Agent.Think = spec.Uniform(10*time.Millisecond, 50*time.Millisecond)
	sc.Agent.WorkGap = spec.Uniform(10*time.Millisecond, 40*time.Millisecond)
	sc.Agent.Stall = spec.Dist{Min: 2 * time.Millisecond, Max: 20 * time.Millisecond, TailP: 0.4, TailMin: 400 * time.Millisecond, TailMax: 750 * time.Millisecond}
	return sc
}

// On the same scenario, each Redis contender's verdict in virtual time
// (on miniredis) is the one in kind it gets in real time on the Redis of
// scripts/redis.sh, every contender side by side in one real run: the
// same findings, broken or held, for the same contenders. Its real-time
// part is one run of 4 s, for the CI's budget.
func TestVirtualAgreesWithRealRedis(t *testing.T) {
	url := os.Getenv("LEASEFENCE_REDIS_URL")
	if url == "" {
		t.Skip("LEASEFENCE_REDIS_URL is not set: start a Redis with scripts/redis.sh start, then eval \"$(scripts/redis.sh env)\"")
	}
	modes := []history.Mode{history.Naive, history.Fenced, registry.Redsync, registry.Redislock}
	if _, err := exec.LookPath("redis-server"); err == nil {
		modes = append(modes, registry.Redlock) // on three redis-servers of its own
	} else {
		t.Log("redlock left out: no redis-server to start its three servers (scripts/redis.sh install)")
	}
	sc := stalls(t)
	real, err := realtime.RunScenario(t.Context(), realtime.Config{Backend: registry.Redis, TempDir: t.TempDir(), Settings: redisbackend.Settings{URL: url}.Entry()}, sc,
		realtime.RunOptions{Modes: modes})
	if err != nil {
		t.Fatal(err)
	}
	virtual := virtualReports(t, sc, modes)
	for _, m := range modes {
		r, v := kindOf(real.Modes[m]), kindOf(virtual[m])
		if r != v {
			t.Errorf("%s: real Redis says lock %s, writes %s; virtual time lock %s, writes %s (real: %q)", m, r.lock, r.writes, v.lock, v.writes,
				real.Modes[m].Violations)
			continue
		}
		t.Logf("%s: lock %s, writes %s, in real and virtual time (stale writes %d and %d)", m, r.lock, r.writes, real.Modes[m].StaleWritesLanded, virtual[m].StaleWritesLanded)
	}
}

// virtualReports runs sc in virtual time on the targets that run modes,
// and returns each mode's report.
func virtualReports(t *testing.T, sc spec.Scenario, modes []history.Mode) map[history.Mode]*history.Report {
	t.Helper()
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	targets, err := swarmTargets(names)
	if err != nil {
		t.Fatal(err)
	}
	out := map[history.Mode]*history.Report{}
	for _, tg := range targets {
		o := virtualtest.Run(t, sc, tg, virtualtest.Config{})
		if o.Err != nil {
			t.Fatal(errors.Join(errors.New(tg.Name), o.Err))
		}
		for m, rep := range o.Result.Modes {
			out[m] = rep
		}
	}
	return out
}
