package redislease_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// A holder session on a Redis coordinator, and a write through the gate in
// the same Redis: the SET lands if and only if the holder's fence is not
// below the gate's floor. (Not run: it needs a Redis at localhost:6379.)
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	coord, err := redislease.New(rdb, redislease.Options{TTL: 5 * time.Second}) // any number of processes may share it
	if err != nil {
		log.Fatal(err)
	}
	gate, err := redislease.NewGate(rdb, "deploy-slot", redislease.GateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-a"), Holder: "agent-a", ClockSkew: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds the acquisition only
	defer cancel()
	session, err := leasefence.Hold(ctx, coord, client, "deploy-slot", leasefence.HoldOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Release(context.Background())

	err = gate.Commit(ctx, session.Token(), func(ctx context.Context, pipe redis.Pipeliner) error {
		pipe.Set(ctx, "{leasefence:}app:deploy-slot:version", "v42", 0) // the gate's hash slot, for a cluster
		return nil
	})
	if errors.Is(err, leasefence.ErrStaleFence) {
		log.Print("a newer holder wrote first; this write was refused and logged")
	}
}
