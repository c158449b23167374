package redisbench_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// needRedis connects to the Redis at LEASEFENCE_REDIS_URL, or skips b
// saying how to start one.
func needRedis(b *testing.B) *redis.Client {
	b.Helper()
	url := os.Getenv("LEASEFENCE_REDIS_URL")
	if url == "" {
		b.Skip(`LEASEFENCE_REDIS_URL is unset: start a throwaway Redis with scripts/redis.sh start, then eval "$(scripts/redis.sh env)"`)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatalf("LEASEFENCE_REDIS_URL=%s: %v", url, err)
	}
	c := redis.NewClient(opt)
	b.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		b.Skipf("no Redis answers at LEASEFENCE_REDIS_URL=%s (%v): start one with scripts/redis.sh start", url, err)
	}
	return c
}

// prefix is a key prefix of the benchmark's own, so that runs never meet.
func prefix(b *testing.B) string {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		b.Fatal(err)
	}
	return "bench-" + hex.EncodeToString(r[:])
}

// fsyncAlways reports whether the Redis waits for the disk on every write.
func fsyncAlways(b *testing.B, c *redis.Client) bool {
	cfg, err := c.ConfigGet(b.Context(), "app*").Result()
	if err != nil {
		b.Fatal(err)
	}
	return cfg["appendonly"] == "yes" && cfg["appendfsync"] == "always"
}

type impl struct {
	name string
	op   func(i int) error
}

// byTurns runs every impl once per iteration of b's loop, in turn, so that
// all see the same machine at the same moments, and reports each one's
// median latency and the ratio of the first (ours) to each other's.
func byTurns(b *testing.B, c *redis.Client, impls ...impl) {
	b.Helper()
	lat := make([][]time.Duration, len(impls))
	for i := 0; b.Loop(); i++ {
		for k, im := range impls {
			start := time.Now()
			if err := im.op(i); err != nil {
				b.Fatalf("%s: %v", im.name, err)
			}
			lat[k] = append(lat[k], time.Since(start))
		}
	}
	p50 := make([]float64, len(impls))
	for k, im := range impls {
		p50[k] = median(lat[k])
		b.ReportMetric(p50[k], "p50-µs-"+im.name)
	}
	for k := 1; k < len(impls); k++ {
		b.ReportMetric(p50[0]/p50[k], "x-"+impls[k].name)
	}
	always := 0.0
	if fsyncAlways(b, c) {
		always = 1
	}
	b.ReportMetric(always, "appendfsync-always")
}

// median is lat's median in microseconds; it sorts lat.
func median(lat []time.Duration) float64 {
	slices.Sort(lat)
	return float64(lat[len(lat)/2].Nanoseconds()) / 1e3
}

// leasefenceCycle is what a holder on redislease runs to take a free
// resource and give it back: BeginAcquire, Acquire, CompleteAcquire,
// Release.
func leasefenceCycle(b *testing.B, c *redis.Client) func(int) error {
	ctx := b.Context()
	coord, err := redislease.New(c, redislease.Options{Prefix: prefix(b), TTL: 10 * time.Second, ReplayWindow: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("bench"), Holder: "agent-a"})
	if err != nil {
		b.Fatal(err)
	}
	return func(int) error {
		req, err := client.BeginAcquire("r")
		if err != nil {
			return err
		}
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			return fmt.Errorf("Acquire = %+v, %v", out, err)
		}
		if _, err := client.CompleteAcquire(req, out.Grant); err != nil {
			return err
		}
		rel, err := coord.Release(ctx, out.Grant.Token)
		if err != nil || !rel.OK {
			return fmt.Errorf("Release = %+v, %v", rel, err)
		}
		return nil
	}
}

// redsyncCycle is go-redsync's Mutex on one instance: Lock (one try) and
// Unlock.
func redsyncCycle(b *testing.B, c *redis.Client) func(int) error {
	ctx := b.Context()
	rs := redsync.New(goredis.NewPool(c))
	key := prefix(b) + ":redsync"
	return func(int) error {
		m := rs.NewMutex(key, redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		if ok, err := m.UnlockContext(ctx); err != nil || !ok {
			return fmt.Errorf("Unlock = %v, %v", ok, err)
		}
		return nil
	}
}

// redislockCycle is bsm/redislock: Obtain (no retry) and Release.
func redislockCycle(b *testing.B, c *redis.Client) func(int) error {
	ctx := b.Context()
	locker := redislock.New(c)
	key := prefix(b) + ":redislock"
	return func(int) error {
		l, err := locker.Obtain(ctx, key, 10*time.Second, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

// BenchmarkAcquireRelease is one holder taking a free resource and giving
// it back: redislease against redsync and redislock.
func BenchmarkAcquireRelease(b *testing.B) {
	c := needRedis(b)
	byTurns(b, c, impl{"leasefence", leasefenceCycle(b, c)}, impl{"redsync", redsyncCycle(b, c)}, impl{"redislock", redislockCycle(b, c)})
}

// gatedSet is one Commit of one SET by the floor's holder (a holder writing
// again under its lease), or by a new holder with a higher fence each time.
func gatedSet(b *testing.B, c *redis.Client, rising bool) func(int) error {
	ctx := b.Context()
	p := prefix(b)
	g, err := redislease.NewGate(c, "r", redislease.GateOptions{Prefix: p})
	if err != nil {
		b.Fatal(err)
	}
	key := "{" + p + "}app:value"
	return func(i int) error {
		t := leasefence.Token{Resource: "r", Holder: "agent-a", Fence: 1}
		if rising {
			t = leasefence.Token{Resource: "r", Holder: "agent-" + strconv.Itoa(i), Fence: leasefence.Fence(i + 1)}
		}
		return g.Commit(ctx, t, func(ctx context.Context, pipe redis.Pipeliner) error {
			pipe.Set(ctx, key, "v", 0)
			return nil
		})
	}
}

// bareSet is the same SET, unguarded: what a write costs without a gate.
func bareSet(b *testing.B, c *redis.Client) func(int) error {
	ctx := b.Context()
	key := "{" + prefix(b) + "}app:value"
	return func(int) error { return c.Set(ctx, key, "v", 0).Err() }
}

// scriptedSet is the one round-trip form of a gated write: a script that
// judges the fence against the floor, raises it and runs the write, all in
// one step on the server. It is safe (Redis runs a script atomically) but
// takes the write as a script's arguments, not as the caller's typed
// go-redis commands, and must be told every key it touches: what the
// WATCH form of redislease.Gate keeps (see its package doc).
func scriptedSet(b *testing.B, c *redis.Client, rising bool) func(int) error {
	ctx := b.Context()
	p := "{" + prefix(b) + "}"
	floor, key := p+"floor", p+"app:value"
	return func(i int) error {
		fence, holder := 1, "agent-a"
		if rising {
			fence, holder = i+1, "agent-"+strconv.Itoa(i)
		}
		n, err := gateScript.Run(ctx, c, []string{floor, key}, fence, holder, "v").Int()
		if err != nil || n != 1 {
			return fmt.Errorf("scripted commit = %d, %v", n, err)
		}
		return nil
	}
}

var gateScript = redis.NewScript(`
local f = tonumber(redis.call("HGET", KEYS[1], "f") or "0")
local h = redis.call("HGET", KEYS[1], "h")
local t = tonumber(ARGV[1])
if t < f or (t == f and h and h ~= ARGV[2]) then return 0 end
if t > f then redis.call("HSET", KEYS[1], "f", ARGV[1], "h", ARGV[2]) end
redis.call("SET", KEYS[2], ARGV[3])
return 1`)

// BenchmarkCommit is a gated write against a bare SET and against the
// scripted one round-trip form.
func BenchmarkCommit(b *testing.B) {
	c := needRedis(b)
	for _, rising := range []bool{false, true} {
		name := map[bool]string{false: "fence=same", true: "fence=new"}[rising]
		b.Run(name, func(b *testing.B) {
			byTurns(b, c, impl{"gate", gatedSet(b, c, rising)}, impl{"bare-set", bareSet(b, c)}, impl{"script", scriptedSet(b, c, rising)})
		})
	}
}
