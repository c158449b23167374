package realtime

import (
	"cmp"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/spec"
)

// CheckRedisURL reports whether u is a Redis URL go-redis can dial.
func CheckRedisURL(u string) error {
	if _, err := redis.ParseURL(u); err != nil {
		return fmt.Errorf("%q must be a URL such as redis://127.0.0.1:6379/0", u)
	}
	return nil
}

// checkRedis is Check's part for the Redis backend and store.
func (c Config) checkRedis(sc spec.Scenario) error {
	bad := func(setting string, cause error, format string, args ...any) error {
		return &ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...), Err: cause}
	}
	if c.store() == StoreRedis && c.Backend != BackendRedis {
		return bad("resource", nil, "redis keeps the gates in the backend's Redis: it needs backend redis")
	}
	if c.Backend != BackendRedis {
		if c.RedisURL != "" {
			return bad("redis-url", nil, "needs backend redis")
		}
		return nil
	}
	if c.RedisURL != "" {
		if err := CheckRedisURL(c.RedisURL); err != nil {
			return bad("redis-url", nil, "%v", err)
		}
		if len(sc.Restarts) > 0 {
			return bad("scenario", nil, "it restarts the coordinator, and only the lab's own redis-server can be restarted: drop --redis-url or the restarts")
		}
	}
	if sc.Clocks.CoordinatorDriftPPM != 0 {
		return bad("scenario", ErrUnmappable, "Redis keeps its own time: clocks.coordinator_drift_ppm must be 0, got %v", sc.Clocks.CoordinatorDriftPPM)
	}
	if ttl := Scale(sc, cmp.Or(c.TimeScale, 1)).TTL; ttl%time.Millisecond != 0 {
		return bad("time-scale", ErrUnmappable, "the ttl becomes %v, and Redis's PX takes whole milliseconds", ttl)
	}
	return nil
}
