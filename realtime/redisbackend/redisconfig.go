package redisbackend

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence/redislease"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// The Redis topologies the backend starts (realtime.Config.RedisTopology),
// as the scenario's vocabulary names them; the sentinel topology is
// package redisdeploy's deployment, RedisReplicas replicas and three
// Sentinels.
const (
	RedisSingle   = spec.RedisSingle
	RedisSentinel = spec.RedisSentinel
)

// RedisReplicas is how many replicas the sentinel topology runs.
const RedisReplicas = 2

// CheckRedisURL reports whether u is a Redis URL go-redis can dial.
func CheckRedisURL(u string) error {
	if _, err := redis.ParseURL(u); err != nil {
		return fmt.Errorf("%q must be a URL such as redis://127.0.0.1:6379/0", u)
	}
	return nil
}

// CheckRedisTopology reports whether t names a topology.
func CheckRedisTopology(t string) error {
	if t != "" && !slices.Contains(spec.RedisTopologies, t) {
		return fmt.Errorf("must be %s or %s, got %q", RedisSingle, RedisSentinel, t)
	}
	return nil
}

// checkSettings checks each setting only Redis reads, alone: the URL, the
// topology, and WAIT's replicas and timeout.
func checkSettings(c realtime.Config) error {
	bad := func(setting string, err error) error {
		return &realtime.ConfigError{Setting: setting, Problem: err.Error()}
	}
	if c.RedisURL != "" {
		if err := CheckRedisURL(c.RedisURL); err != nil {
			return bad("redis-url", err)
		}
	}
	if err := CheckRedisTopology(c.RedisTopology); err != nil {
		return bad("redis-topology", err)
	}
	if n := c.RedisWaitReplicas; n < 0 {
		return bad("redis-wait-replicas", fmt.Errorf("must be >= 0, got %d", n))
	}
	if d := c.RedisWaitTimeout; d < 0 || d%time.Millisecond != 0 || (d > 0 && d < time.Millisecond) {
		return bad("redis-wait-timeout", fmt.Errorf("must be whole milliseconds >= 1ms, got %v", d))
	}
	return nil
}

// check is realtime.Config.Check's part for the Redis backend: its URL,
// its topology and the fenced mode's safety options, what only the lab's
// own servers play, and the time Redis keeps.
func check(c realtime.Config, sc spec.Scenario) error {
	bad := func(setting string, cause error, format string, args ...any) error {
		return &realtime.ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...), Err: cause}
	}
	sentinel := c.RedisTopology == RedisSentinel
	if err := CheckRedisTopology(c.RedisTopology); err != nil {
		return bad("redis-topology", nil, "%v", err)
	}
	if err := checkReplication(c); err != nil {
		return err
	}
	if c.RedisURL != "" {
		if err := CheckRedisURL(c.RedisURL); err != nil {
			return bad("redis-url", nil, "%v", err)
		}
		if sentinel {
			return bad("redis-topology", nil, "the sentinel topology is one the lab starts: drop --redis-url")
		}
		if len(sc.Restarts) > 0 {
			return bad("scenario", nil, "it restarts the coordinator, and only the lab's own redis-server can be restarted: drop --redis-url or the restarts")
		}
	}
	if sentinel {
		if len(sc.Restarts) > 0 {
			return bad("scenario", nil, "it restarts the coordinator, which the sentinel topology plays as failovers (faults: pause_primary, kill_primary, partition_primary), not restarts: drop the restarts")
		}
		if c.Store() == registry.Redis {
			return bad("resource", nil, "on the sentinel topology the gates live outside Redis (--resource memory or sqlite): a failover discards the writes the old primary took alone, and with them the record the run is judged by")
		}
	} else {
		for _, f := range spec.RedisFaults {
			if sc.Has(f) {
				return bad("redis-topology", spec.ErrNeedsSentinel, "the scenario's faults (%s) strike the primary of the sentinel topology: add --redis-topology sentinel", f)
			}
		}
	}
	if sc.Clocks.CoordinatorDriftPPM != 0 {
		return bad("scenario", realtime.ErrUnmappable, "Redis keeps its own time: clocks.coordinator_drift_ppm must be 0, got %v", sc.Clocks.CoordinatorDriftPPM)
	}
	scaled := realtime.Scale(sc, cmp.Or(c.TimeScale, 1))
	if ttl := scaled.TTL; ttl%time.Millisecond != 0 {
		return bad("time-scale", realtime.ErrUnmappable, "the ttl becomes %v, and Redis's PX takes whole milliseconds", ttl)
	}
	if d := scaled.LockDelay; d%time.Millisecond != 0 {
		return bad("time-scale", realtime.ErrUnmappable, "the lock_delay becomes %v, and Redis's PX takes whole milliseconds", d)
	}
	return nil
}

// checkReplication checks the WAIT the fenced mode asks of Redis.
func checkReplication(c realtime.Config) error {
	r := redislease.Replication{Replicas: c.RedisWaitReplicas, Timeout: c.RedisWaitTimeout}
	bad := func(setting, format string, args ...any) error {
		return &realtime.ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	sentinel := c.RedisTopology == RedisSentinel
	switch {
	case r.Replicas < 0:
		return bad("redis-wait-replicas", "must be >= 0, got %d", r.Replicas)
	case r.Replicas == 0 && r.Timeout != 0:
		return bad("redis-wait-timeout", "needs --redis-wait-replicas: there is no WAIT to time out")
	case r.Replicas == 0:
		return nil
	case r.Timeout < time.Millisecond || r.Timeout%time.Millisecond != 0:
		return bad("redis-wait-timeout", "must be whole milliseconds >= 1ms with --redis-wait-replicas, got %v", r.Timeout)
	case c.RedisURL == "" && !sentinel:
		return bad("redis-wait-replicas", "the lab's lone redis-server has no replicas to wait for: add --redis-topology sentinel")
	case sentinel && r.Replicas > RedisReplicas:
		return bad("redis-wait-replicas", "the sentinel topology runs %d replicas, got %d", RedisReplicas, r.Replicas)
	}
	return nil
}
