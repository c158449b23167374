package redisbackend

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// Each fault strikes the primary of the moment and ends with a promoted
// replica and the old primary its replica: three faults in a row on one
// topology, each from the primary the last one left.
func TestRedisFaultsFailOverAndComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis deployment and fails it over three times")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH (scripts/redis.sh start installs Debian's): ", err)
	}
	r, err := NewRedis(t.Context(), RedisOptions{Dir: t.TempDir(), Topology: RedisSentinel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	for _, kind := range spec.RedisFaults {
		before, err := r.deploy.Primary(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		f, err := r.beginFault(t.Context(), kind)
		if err != nil {
			t.Fatal(err)
		}
		if f.victim.Name != before.Name {
			t.Errorf("%s struck %s; the primary was %s", kind, f.victim.Name, before.Name)
		}
		select {
		case <-f.done:
		case <-time.After(30 * time.Second):
		}
		out := f.End(t.Context())
		t.Logf("%s: %+v", kind, out)
		if out.Err != nil || out.Outcome != history.OutcomeFailedOver || strings.HasPrefix(out.Detail, before.Name+" ") {
			t.Fatalf("%s: %+v", kind, out)
		}
		// The old primary is back in the deployment: a replica, or the
		// primary itself if the Sentinels have since failed over to it (a
		// Sentinel whose new link to the promoted server has no answer
		// within down-after, on a loaded machine, finds it down).
		now, err := r.deploy.Primary(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if role, err := before.Role(t.Context()); err != nil || role != "slave" && now != before {
			for _, s := range r.deploy.Sentinels {
				b, _ := os.ReadFile(s.LogFile())
				t.Logf("%s's log:\n%s", s.Name, b)
			}
			t.Fatalf("%s: the old primary's role %q, %v, and the primary %s; want a replica", kind, role, err, now.Name)
		}
		// The run's client follows the Sentinels to the new primary.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err = r.Client().Set(ctx, "after-"+string(kind), "1", 0).Err()
		for err != nil && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			err = r.Client().Set(ctx, "after-"+string(kind), "1", 0).Err()
		}
		cancel()
		if err != nil {
			t.Fatalf("%s: no write through the Sentinels after the failover: %v", kind, err)
		}
	}
}

// A fault that ends before the Sentinels can act says so.
func TestRedisFaultWithoutFailoverSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis deployment")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH: ", err)
	}
	r, err := NewRedis(t.Context(), RedisOptions{Dir: t.TempDir(), Topology: RedisSentinel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	f, err := r.beginFault(t.Context(), spec.FaultPausePrimary)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // far below the Sentinels' 1s down-after
	out := f.End(t.Context())
	if !errors.Is(out.Err, ErrNoFailover) || out.Outcome != "" || !strings.Contains(out.Detail, "no replica was promoted") {
		t.Fatalf("a 100ms pause: %+v; want ErrNoFailover", out)
	}
	lone, err := NewRedis(t.Context(), RedisOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer lone.Close()
	if _, err := lone.beginFault(t.Context(), spec.FaultKillPrimary); !errors.Is(err, ErrNoTopology) {
		t.Fatalf("a fault on the lone server: %v; want ErrNoTopology", err)
	}
}
