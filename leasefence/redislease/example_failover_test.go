package redislease_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence/redislease"
)

// A lock through Sentinel, as an application reaches a replicated Redis:
// every grant and every gated write waits for both replicas, and one
// Watermark per process remembers the fences and floors it saw, so a
// failover that rewinds them is caught instead of reissuing a fence. (Not
// run: it needs Sentinels at localhost:26379; scripts/redis-sentinel.sh
// start runs a deployment on loopback, and its env command prints the
// addresses.)
func ExampleReplication() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "leasefence",
		SentinelAddrs: []string{"localhost:26379"},
		MaxRetries:    -1, // a script whose reply was lost may have run: never resend it behind the caller's back
	})
	defer rdb.Close()
	wait := redislease.Replication{Replicas: 2, Timeout: 500 * time.Millisecond}
	seen := redislease.NewWatermark()

	ctx := context.Background()
	session, err := redislease.Lock(ctx, rdb, "deploy-slot", redislease.LockOptions{Replication: wait, Watermark: seen})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Release(context.Background())

	gate, err := redislease.NewGate(rdb, "deploy-slot", redislease.GateOptions{Replication: wait, Watermark: seen})
	if err != nil {
		log.Fatal(err)
	}
	err = gate.Commit(ctx, session.Token(), func(ctx context.Context, pipe redis.Pipeliner) error {
		pipe.Set(ctx, "{leasefence:}app:deploy-slot:version", "v42", 0)
		return nil
	})
	var notReplicated *redislease.ReplicationError
	if errors.As(err, &notReplicated) {
		log.Printf("written on the primary, but %d of %d replicas have it: a failover may lose it", notReplicated.Acked, notReplicated.Wanted)
	}
	if rewinds, n := seen.Rewinds(); n > 0 {
		log.Printf("Redis went back below what this process saw %d times, the last: %v", n, rewinds[len(rewinds)-1])
	}
}
