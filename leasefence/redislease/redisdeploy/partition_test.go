package redisdeploy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
)

// A primary partitioned from its replicas and the Sentinels still takes a
// client's writes, which no replica receives; the Sentinels promote a
// replica; healed, the old primary becomes its replica and loses them.
func TestPartitionedPrimaryTakesWritesThatAFailoverLoses(t *testing.T) {
	t.Parallel()
	d := start(t, redisdeploy.Options{})
	c := failoverClient(t, d)
	waitWrite(t, c, "before", "1")
	old := d.Servers[0]
	pinned := old.Client()
	defer pinned.Close()
	if err := d.Partition(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if err := pinned.Set(t.Context(), "during", "1", 0).Err(); err != nil {
		t.Fatalf("a client's SET on the partitioned primary: %v", err)
	}
	if n, err := pinned.Wait(t.Context(), 1, 200*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 on the partitioned primary = %d, %v; want 0 replicas", n, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now, err := d.WaitFailover(ctx, old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// Two primaries at once: the old one still answers as one.
	if role, err := old.Role(t.Context()); err != nil || role != "master" {
		t.Fatalf("the partitioned old primary's role = %q, %v; want master until healed", role, err)
	}
	nc := now.Client()
	defer nc.Close()
	if err := nc.Get(t.Context(), "during").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET during on the new primary = %v; want nil: the partition kept it from the replicas", err)
	}
	if err := d.Heal(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if err := d.Demote(ctx, old, now); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pinned, "during")
}

// waitGone waits until c's server no longer holds key k.
func waitGone(t *testing.T, c *redis.Client, k string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := c.Get(ctx, k).Err()
		cancel()
		if errors.Is(err, redis.Nil) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s = %v; want it gone after the resync", k, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
