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

// Settings are the settings only the Redis backend reads: a fixture's
// redis: key, and the flags --redis-url, --redis-topology,
// --redis-wait-replicas, --redis-wait-timeout and --redis-watermark
// (registry.Settings: the lab carries them knowing none).
type Settings struct {
	// URL, if set, is an existing Redis to use instead of a throwaway
	// redis-server.
	URL string "json:\"url,omitempty\" help:\"--backend redis: use the existing server at `URL` (keys under a fresh prefix, removed after) instead of a throwaway redis-server\""
	// Topology is the Redis the backend starts: RedisSingle (also "") a
	// lone server, RedisSentinel a primary, replicas and Sentinels.
	Topology string "json:\"topology,omitempty\" help:\"--backend redis: the Redis the run starts (default single):\\n  single: one redis-server, AOF fsynced on every write\\n  sentinel: a primary, 2 replicas and 3 Sentinels, the clients reaching the primary through the Sentinels; the gates outside Redis (--resource memory or sqlite); the scenario's redis faults fail it over\""
	// WaitReplicas and WaitTimeout make the fenced mode's coordinator
	// and gates WAIT for that many replicas, that long, after every fence
	// minted and floor raised (redislease.Replication).
	WaitReplicas int           "json:\"wait_replicas,omitempty\" help:\"--backend redis: the fenced mode WAITs for `N` replicas after each fence minted and floor raised (redislease.Replication; needs --redis-wait-timeout); a grant too few acknowledged is an error\""
	WaitTimeout  time.Duration "json:\"wait_timeout,omitempty\" help:\"--backend redis: how long one WAIT of --redis-wait-replicas may block (whole milliseconds)\""
	// Watermark gives the fenced mode's coordinator and gates one
	// redislease.Watermark: a rewound counter or floor is caught.
	Watermark bool "json:\"watermark,omitempty\" help:\"--backend redis: the fenced mode remembers the highest fence and floor it saw, outside Redis (redislease.Watermark): a counter or floor a failover rewound is caught, never reissued silently\""
}

// SettingsOf is c's Redis settings (the zero ones if it gives none).
func SettingsOf(c realtime.Config) Settings {
	if s, ok := c.Settings[registry.Redis].(*Settings); ok && s != nil {
		return *s
	}
	return Settings{}
}

// Entry is s as a realtime.Config's Settings.
func (s Settings) Entry() map[string]any { return map[string]any{registry.Redis: &s} }

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
// topology, and WAIT's replicas and timeout (registry.Settings.Check).
func checkSettings(v any) error {
	rs := *v.(*Settings)
	bad := func(key string, err error) error {
		return &registry.SettingError{Key: key, Problem: err.Error()}
	}
	if rs.URL != "" {
		if err := CheckRedisURL(rs.URL); err != nil {
			return bad("url", err)
		}
	}
	if err := CheckRedisTopology(rs.Topology); err != nil {
		return bad("topology", err)
	}
	if n := rs.WaitReplicas; n < 0 {
		return bad("wait_replicas", fmt.Errorf("must be >= 0, got %d", n))
	}
	if d := rs.WaitTimeout; d < 0 || d%time.Millisecond != 0 || (d > 0 && d < time.Millisecond) {
		return bad("wait_timeout", fmt.Errorf("must be whole milliseconds >= 1ms, got %v", d))
	}
	return nil
}

// check is realtime.Config.Check's part for the Redis backend: its URL,
// its topology and the fenced mode's safety options, what only the lab's
// own servers play, and the time Redis keeps.
func check(c realtime.Config, sc spec.Scenario) error {
	rs := SettingsOf(c)
	bad := func(setting string, cause error, format string, args ...any) error {
		return &realtime.ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...), Err: cause}
	}
	sentinel := rs.Topology == RedisSentinel
	if err := CheckRedisTopology(rs.Topology); err != nil {
		return bad("redis-topology", nil, "%v", err)
	}
	if err := checkReplication(c); err != nil {
		return err
	}
	if rs.URL != "" {
		if err := CheckRedisURL(rs.URL); err != nil {
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
	rs := SettingsOf(c)
	r := redislease.Replication{Replicas: rs.WaitReplicas, Timeout: rs.WaitTimeout}
	bad := func(setting, format string, args ...any) error {
		return &realtime.ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	sentinel := rs.Topology == RedisSentinel
	switch {
	case r.Replicas < 0:
		return bad("redis-wait-replicas", "must be >= 0, got %d", r.Replicas)
	case r.Replicas == 0 && r.Timeout != 0:
		return bad("redis-wait-timeout", "needs --redis-wait-replicas: there is no WAIT to time out")
	case r.Replicas == 0:
		return nil
	case r.Timeout < time.Millisecond || r.Timeout%time.Millisecond != 0:
		return bad("redis-wait-timeout", "must be whole milliseconds >= 1ms with --redis-wait-replicas, got %v", r.Timeout)
	case rs.URL == "" && !sentinel:
		return bad("redis-wait-replicas", "the lab's lone redis-server has no replicas to wait for: add --redis-topology sentinel")
	case sentinel && r.Replicas > RedisReplicas:
		return bad("redis-wait-replicas", "the sentinel topology runs %d replicas, got %d", RedisReplicas, r.Replicas)
	}
	return nil
}
