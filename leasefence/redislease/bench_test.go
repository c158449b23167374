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
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

func BenchmarkAcquireRelease(b *testing.B) {
	c := needRedis(b)
	ctx := context.Background()
	b.Run("leasefence", func(b *testing.B) {
		coord, err := redislease.New(c, redislease.Options{Prefix: newPrefix(b), TTL: 10 * time.Second, ReplayWindow: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		measure(b, func(i int) error {
			out, err := coord.Acquire(ctx, leasefence.AcquireRequest{RequestID: "req-" + strconv.Itoa(i), Holder: "agent-a", Resource: "r"})
			if err != nil || !out.OK {
				return errorf("Acquire = %+v, %v", out, err)
			}
			rel, err := coord.Release(ctx, out.Grant.Token)
			if err != nil || !rel.OK {
				return errorf("Release = %+v, %v", rel, err)
			}
			return nil
		})
	})
	b.Run("setnx-baseline", func(b *testing.B) {
		key := "{" + newPrefix(b) + "}lock"
		measure(b, func(i int) error {
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
		})
	})
}

func BenchmarkCommit(b *testing.B) {
	c := needRedis(b)
	ctx := context.Background()
	gated := func(rising bool) func(b *testing.B) {
		return func(b *testing.B) {
			prefix := newPrefix(b)
			g, err := redislease.NewGate(c, "r", redislease.GateOptions{Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			key := "{" + prefix + "}app:value"
			measure(b, func(i int) error {
				t := leasefence.Token{Resource: "r", Holder: "agent-a", Fence: 1}
				if rising {
					t = leasefence.Token{Resource: "r", Holder: "agent-" + strconv.Itoa(i), Fence: leasefence.Fence(i + 1)}
				}
				return g.Commit(ctx, t, func(ctx context.Context, p redis.Pipeliner) error {
					p.Set(ctx, key, "v", 0)
					return nil
				})
			})
		}
	}
	b.Run("gate-same-fence", gated(false))
	b.Run("gate-new-fence", gated(true))
	b.Run("bare-set", func(b *testing.B) {
		key := "{" + newPrefix(b) + "}app:value"
		measure(b, func(int) error { return c.Set(ctx, key, "v", 0).Err() })
	})
}
