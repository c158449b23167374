package spec

import (
	"errors"
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
var ErrNeedsSentinel = errors.New("faults of the Redis primary (faults: pause_primary, kill_primary, partition_primary) need the real-time Redis backend on its sentinel topology (--backend redis --redis-topology sentinel)")

// The faults of the Redis primary, on the faults list, each struck on
// whichever server is the primary at At, for Duration, which must give
// the Sentinels time to fail over (they find a primary down after 1s of
// silence, and promote a replica a second or two later); then the old
// primary comes back, as a replica of the promoted one. One at a time:
// each begins after the one before it ends.
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

// MinRedisFault is the shortest Redis fault: the Sentinels need a second
// of silence to find the primary down, and a moment more to promote.
const MinRedisFault = 2 * time.Second

// RedisTarget is the Target of a fault of the Redis primary: "redis
// primary redis-0".
func RedisTarget(server string) string { return "redis primary " + server }

// primaryKind is what the faults list holds of a fault of the Redis
// primary.
var primaryKind = timedKind{
	aim: func(TimedFault) string { return "redis primary" },
	validate: func(s *Scenario, i int, bad complaint) {
		f, field := s.Faults[i], faultField(i)
		if f.Duration < MinRedisFault {
			bad(field+".duration", "must be in [%v, %v] (a failover takes the Sentinels about 2s), got %v", MinRedisFault, MaxDuration, f.Duration)
		}
		if f.Member != 0 || f.Delay != 0 {
			bad(field, "a fault of the Redis primary names no member and delays nothing")
		}
		for _, g := range s.Faults[:i] {
			if isPrimaryFault(g.Do) && f.At < g.At+g.Duration {
				bad(field+".at", "begins at %v, before the fault of the primary before it ends (%v): one fault of the primary at a time", f.At, g.At+g.Duration)
			}
		}
	},
}

func isPrimaryFault(f Fault) bool {
	for _, k := range RedisFaults {
		if f == k {
			return true
		}
	}
	return false
}
