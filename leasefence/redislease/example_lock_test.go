package redislease_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// One call takes the lock and keeps it renewed; a write goes through the
// gate under its token. (Not run: it needs a Redis at localhost:6379;
// TestLock runs the same steps against LEASEFENCE_REDIS_URL.)
func ExampleLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	gate, err := redislease.NewGate(rdb, "deploy-slot", redislease.GateOptions{})
	if err != nil {
		log.Fatal(err)
	}

	session, err := redislease.Lock(ctx, rdb, "deploy-slot", redislease.LockOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Release(context.Background())

	err = gate.Commit(ctx, session.Token(), func(ctx context.Context, pipe redis.Pipeliner) error {
		return pipe.Set(ctx, "{leasefence:}app:version", "v42", 0).Err() // the gate's hash slot, for a cluster
	})
	if errors.Is(err, leasefence.ErrStaleFence) {
		log.Print("a newer holder wrote first; this write was refused and logged")
	}
}
