package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The Redis topologies a real-time run on Redis starts (lab run
// --redis-topology, a fixture's redis.topology).
const (
	// RedisSingle is one redis-server, its append-only file fsynced on
	// every write: the default.
	RedisSingle = "single"
	// RedisSentinel is a primary, two replicas and three Sentinels, the
	// clients reaching the primary through the Sentinels, as an
	// application does.
	RedisSentinel = "sentinel"
)

// RedisTopologies lists the topologies, the default first.
var RedisTopologies = []string{RedisSingle, RedisSentinel}

// ErrNeedsSentinel refuses a scenario with faults of the Redis primary
// where no Sentinel topology runs.
var ErrNeedsSentinel = errors.New("faults of the Redis primary (redis.faults) need the real-time Redis backend on its sentinel topology (--backend redis --redis-topology sentinel)")

// Redis is what a scenario asks of Redis's sentinel topology: faults on
// its primary. Only the real-time Redis backend on the sentinel topology
// plays them.
type Redis struct {
	Faults []RedisFault `json:"faults,omitempty"`
}

// The faults of the Redis primary (redis.faults' do), each struck on
// whichever server is the primary at At, for Duration, which must give
// the Sentinels time to fail over (they find a primary down after 1s of
// silence, and promote a replica a second or two later); then the old
// primary comes back, as a replica of the promoted one.
const (
	// FaultPausePrimary stops the primary's process (SIGSTOP).
	FaultPausePrimary Fault = "pause_primary"
	// FaultKillPrimary kills it (SIGKILL) and, at the end, starts it
	// again on its append-only file.
	FaultKillPrimary Fault = "kill_primary"
	// FaultPartitionPrimary cuts it off from its replicas and the
	// Sentinels while clients still reach it: it goes on applying the
	// writes of clients not yet routed to the promoted replica, writes no
	// replica receives and the failover discards.
	FaultPartitionPrimary Fault = "partition_primary"
)

// RedisFaults lists the faults of the Redis primary.
var RedisFaults = []Fault{FaultPausePrimary, FaultKillPrimary, FaultPartitionPrimary}

// RedisFault is one fault of the Redis primary, from At for Duration.
type RedisFault struct {
	At       time.Duration `json:"at"`
	Do       Fault         `json:"do"`
	Duration time.Duration `json:"duration"`
}

// MinRedisFault is the shortest Redis fault: the Sentinels need a second
// of silence to find the primary down, and a moment more to promote.
const MinRedisFault = 2 * time.Second

// RedisTarget is the Target of a fault of the Redis primary: "redis
// primary redis-0".
func RedisTarget(server string) string { return "redis primary " + server }

func (s *Scenario) validateRedis(bad complaint) {
	var last time.Duration
	for i, f := range s.Redis.Faults {
		field := fmt.Sprintf("redis.faults[%d]", i)
		if f.At < 0 || f.At > s.Duration {
			bad(field+".at", "must be in [0, duration], got %v", f.At)
		}
		if f.Duration < MinRedisFault || f.Duration > MaxDuration {
			bad(field+".duration", "must be in [%v, %v] (a failover takes the Sentinels about 2s), got %v", MinRedisFault, MaxDuration, f.Duration)
		}
		if !isRedisFault(f.Do) {
			names := make([]string, len(RedisFaults))
			for i, k := range RedisFaults {
				names[i] = string(k)
			}
			bad(field+".do", "must be %s, got %q", strings.Join(names, ", "), f.Do)
		}
		if i > 0 && f.At < last {
			bad(field+".at", "begins at %v, before the fault before it ends (%v): one fault of the primary at a time", f.At, last)
		}
		last = f.At + f.Duration
	}
}

func isRedisFault(f Fault) bool {
	for _, k := range RedisFaults {
		if f == k {
			return true
		}
	}
	return false
}
