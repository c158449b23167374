package redislease_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// The baselines are what a team on Redis runs without leasefence: the lock
// of redsync and redislock on one instance (SET NX PX, and a script that
// deletes the key only if it still holds the owner's random value), and a
// bare SET in place of a gated commit. Run beside them:
//
//	scripts/redis.sh start && eval "$(scripts/redis.sh env)"
//	cd leasefence/redislease && go test -run '^$' -bench . -benchtime 3000x -count 5

// delIfOwner is redsync's release for one instance.
var delIfOwner = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)

// measure runs op in b's loop and reports the median and the 99th
// percentile of its latency beside ns/op.
func measure(b *testing.B, op func(i int) error) {
	b.Helper()
	lat := make([]time.Duration, 0, 4096)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.ReportMetric(percentile(lat, 0.50), "p50-µs")
	b.ReportMetric(percentile(lat, 0.99), "p99-µs")
}

// paired runs ours and base by turns in b's loop, so that both see the same
// machine at the same moments (a shared machine's load comes and goes), and
// reports each one's median and 99th percentile and the ratio of the
// medians: the number to hold against the 1.5x target.
func paired(b *testing.B, ours, base func(i int) error) {
	b.Helper()
	lat := [2][]time.Duration{}
	for i := 0; b.Loop(); i++ {
		for k, op := range [2]func(int) error{ours, base} {
			start := time.Now()
			if err := op(i); err != nil {
				b.Fatal(err)
			}
			lat[k] = append(lat[k], time.Since(start))
		}
	}
	b.ReportMetric(percentile(lat[0], 0.50), "p50-µs")
	b.ReportMetric(percentile(lat[0], 0.99), "p99-µs")
	b.ReportMetric(percentile(lat[1], 0.50), "base-p50-µs")
	b.ReportMetric(percentile(lat[1], 0.99), "base-p99-µs")
	b.ReportMetric(percentile(lat[0], 0.50)/percentile(lat[1], 0.50), "x-base-p50")
}

// percentile is the q-quantile of lat, in microseconds; it sorts lat.
func percentile(lat []time.Duration, q float64) float64 {
	slices.Sort(lat)
	return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3
}

// acquireRelease is one acquire and one release of a resource through a
// coordinator of its own.
func acquireRelease(b *testing.B, c redis.UniversalClient) func(i int) error {
	ctx := context.Background()
	coord, err := redislease.New(c, redislease.Options{Prefix: newPrefix(b), TTL: 10 * time.Second, ReplayWindow: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return func(i int) error {
		out, err := coord.Acquire(ctx, leasefence.AcquireRequest{RequestID: "req-" + strconv.Itoa(i), Holder: "agent-a", Resource: "r"})
		if err != nil || !out.OK {
			return errorf("Acquire = %+v, %v", out, err)
		}
		rel, err := coord.Release(ctx, out.Grant.Token)
		if err != nil || !rel.OK {
			return errorf("Release = %+v, %v", rel, err)
		}
		return nil
	}
}

// setNXLock is the baseline: redsync's lock and unlock on one instance.
func setNXLock(b *testing.B, c redis.UniversalClient) func(i int) error {
	ctx := context.Background()
	key := "{" + newPrefix(b) + "}lock"
	return func(i int) error {
		owner := "owner-" + strconv.Itoa(i)
		ok, err := c.SetNX(ctx, key, owner, 10*time.Second).Result()
		if err != nil || !ok {
			return errorf("SET NX PX = %v, %v", ok, err)
		}
		n, err := delIfOwner.Run(ctx, c, []string{key}, owner).Int()
		if err != nil || n != 1 {
			return errorf("DEL if owner = %d, %v", n, err)
		}
		return nil
	}
}

// gatedSet is one Commit of one SET, under one holder's fence (a holder
// writing again) or under a new holder's higher fence each time (rising).
func gatedSet(b *testing.B, c redis.UniversalClient, rising bool) func(i int) error {
	ctx := context.Background()
	prefix := newPrefix(b)
	g, err := redislease.NewGate(c, "r", redislease.GateOptions{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	key := "{" + prefix + "}app:value"
	return func(i int) error {
		t := leasefence.Token{Resource: "r", Holder: "agent-a", Fence: 1}
		if rising {
			t = leasefence.Token{Resource: "r", Holder: "agent-" + strconv.Itoa(i), Fence: leasefence.Fence(i + 1)}
		}
		return g.Commit(ctx, t, func(ctx context.Context, p redis.Pipeliner) error {
			p.Set(ctx, key, "v", 0)
			return nil
		})
	}
}

// bareSet is the baseline: the same SET, unguarded.
func bareSet(b *testing.B, c redis.UniversalClient) func(i int) error {
	ctx := context.Background()
	key := "{" + newPrefix(b) + "}app:value"
	return func(int) error { return c.Set(ctx, key, "v", 0).Err() }
}

func BenchmarkAcquireRelease(b *testing.B) {
	c := needRedis(b)
	b.Run("leasefence", func(b *testing.B) { measure(b, acquireRelease(b, c)) })
	b.Run("setnx-baseline", func(b *testing.B) { measure(b, setNXLock(b, c)) })
	b.Run("paired", func(b *testing.B) { paired(b, acquireRelease(b, c), setNXLock(b, c)) })
}

func BenchmarkCommit(b *testing.B) {
	c := needRedis(b)
	b.Run("gate-same-fence", func(b *testing.B) { measure(b, gatedSet(b, c, false)) })
	b.Run("gate-new-fence", func(b *testing.B) { measure(b, gatedSet(b, c, true)) })
	b.Run("bare-set", func(b *testing.B) { measure(b, bareSet(b, c)) })
	b.Run("paired-same-fence", func(b *testing.B) { paired(b, gatedSet(b, c, false), bareSet(b, c)) })
	b.Run("paired-new-fence", func(b *testing.B) { paired(b, gatedSet(b, c, true), bareSet(b, c)) })
}
