package spec

import (
	"fmt"
	"slices"
	"time"
)

// DefaultScenario is the built-in scenario the lab runs when given none:
// small enough to watch, and a stale write is refused in its first seconds.
const DefaultScenario = "overlap"

func dur(d time.Duration) *time.Duration { return &d }

// builtins are the named scenarios. Each is a function so callers get a
// fresh copy they may change.
var builtins = map[string]func() Scenario{
	"overlap": func() Scenario {
		return Scenario{
			Name:        "overlap",
			Description: "1 write in 4 stalls past the TTL, so leases are reassigned under stalled holders",
			Seed:        1, Duration: time.Minute, Agents: 4, Resources: 1, TTL: time.Second,
			ClockSkew: 10 * time.Millisecond,
			Agent: Behaviour{
				Think: Uniform(50*time.Millisecond, 300*time.Millisecond),
				Stall: Dist{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond, TailP: 0.25,
					TailMin: 1200 * time.Millisecond, TailMax: 2500 * time.Millisecond},
				WorkGap: Uniform(20*time.Millisecond, 80*time.Millisecond), WritesPerLease: 3, RenewAt: 0.5,
			},
			Network: Network{RequestDelay: Uniform(time.Millisecond, 5*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond)},
		}
	},
	"gap": func() Scenario {
		return Scenario{
			Name: "gap",
			Description: "agent-1 checks its lease at 950ms, stalls past its 1s TTL while agent-2 takes over, and writes at 1400ms: " +
				"the check-to-write gap",
			Seed: 1, Duration: 3 * time.Second, Agents: 2, Resources: 1, TTL: time.Second,
			Agent: Behaviour{WritesPerLease: 1},
			Script: []Action{
				{At: 0, Agent: "agent-1", Do: ActAcquire},
				{At: 950 * time.Millisecond, Agent: "agent-1", Do: ActCheck},
				{At: 950 * time.Millisecond, Agent: "agent-1", Do: ActStall, Duration: 450 * time.Millisecond},
				{At: 1000 * time.Millisecond, Agent: "agent-2", Do: ActAcquire},
				{At: 1010 * time.Millisecond, Agent: "agent-2", Do: ActCheck},
				{At: 1010 * time.Millisecond, Agent: "agent-2", Do: ActWrite},
				{At: 1400 * time.Millisecond, Agent: "agent-1", Do: ActWrite},
			},
		}
	},
	"contend":    func() Scenario { return contend(8) },
	"lock-delay": LockDelayScenario,
	"renewal": func() Scenario {
		return Scenario{
			Name: "renewal",
			Description: "a slow renewal reply: the lease is extended to 1140ms, the reply lands at 1000ms; naive agent-1 counts " +
				"the TTL from the reply (until 2000ms), the client from the send (until 1100ms)",
			Seed: 1, Duration: 3 * time.Second, Agents: 2, Resources: 1, TTL: time.Second,
			Agent: Behaviour{WritesPerLease: 1},
			Script: []Action{
				{At: 0, Agent: "agent-1", Do: ActAcquire},
				{At: 100 * time.Millisecond, Agent: "agent-1", Do: ActRenew,
					RequestDelay: dur(40 * time.Millisecond), ReplyDelay: dur(860 * time.Millisecond)},
				{At: 1200 * time.Millisecond, Agent: "agent-2", Do: ActAcquire},
				{At: 1210 * time.Millisecond, Agent: "agent-2", Do: ActCheck},
				{At: 1210 * time.Millisecond, Agent: "agent-2", Do: ActWrite},
				{At: 1500 * time.Millisecond, Agent: "agent-1", Do: ActCheck},
				{At: 1500 * time.Millisecond, Agent: "agent-1", Do: ActWrite},
			},
		}
	},
	"crowd": func() Scenario {
		return Scenario{
			Name:        "crowd",
			Description: "long-tail stalls: 1 in 20 takes 1.5-4s, like a model call",
			Seed:        1, Duration: 2 * time.Minute, Agents: 50, Resources: 5, TTL: 2 * time.Second,
			ClockSkew: 20 * time.Millisecond,
			Agent: Behaviour{
				Think: Uniform(50*time.Millisecond, 500*time.Millisecond),
				Stall: Dist{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond, TailP: 0.05,
					TailMin: 1500 * time.Millisecond, TailMax: 4 * time.Second},
				WorkGap: Uniform(10*time.Millisecond, 100*time.Millisecond), WritesPerLease: 3, RenewAt: 0.5, Release: true,
			},
			Network: Network{RequestDelay: Uniform(time.Millisecond, 10*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 10*time.Millisecond)},
		}
	},
	"lost-replies": func() Scenario {
		sc := base("lost-replies", "1 reply in 5 is lost; clients resend the same request id, and no retry burns a fence while its grant is live")
		sc.Network.DropReplies = 0.2
		sc.Network.RetryAfter = 50 * time.Millisecond
		sc.Network.MaxRetries = 5
		return sc
	},
	"drift": func() Scenario {
		sc := base("drift", "agent clocks run 2% slow with a 1ms skew budget: holders believe past the coordinator's expiry")
		sc.ClockSkew = time.Millisecond
		sc.Clocks.DriftPPM = Range{Min: -20000, Max: -20000}
		return sc
	},
	"drift-inside": func() Scenario {
		sc := base("drift-inside", "agent clocks run 2% slow with a 25ms skew budget on a 1s TTL: containment holds")
		sc.ClockSkew = 25 * time.Millisecond
		sc.Clocks.DriftPPM = Range{Min: -20000, Max: -20000}
		return sc
	},
	"restart-lost": func() Scenario {
		sc := base("restart-lost", "the coordinator restarts at 10s without persisting its fence counter: the new holder's writes are refused")
		sc.Restarts = []Restart{{At: 10 * time.Second}}
		return sc
	},
	"restart-persisted": func() Scenario {
		sc := base("restart-persisted", "the coordinator restarts at 10s and resumes from its last issued fence")
		sc.Restarts = []Restart{{At: 10 * time.Second, Persist: true}}
		return sc
	},
	"partition": func() Scenario {
		sc := base("partition", "agent-1 is cut off from the coordinator from 5s to 15s, mid-lease")
		sc.Partitions = []Partition{{Agent: "agent-1", From: 5 * time.Second, To: 15 * time.Second}}
		return sc
	},
	"duplicates": func() Scenario {
		sc := base("duplicates", "1 request in 3 is delivered twice")
		sc.Network.Duplicate = 0.3
		return sc
	},
	"push": func() Scenario {
		sc := base("push", "the coordinator pushes each new fence to the gate (Admit) 2ms after minting it")
		sc.Push = Push{Enabled: true, Delay: Const(2 * time.Millisecond)}
		return sc
	},
}

// contend makes commits contend at the gate by design: on each of pairs
// resources a holder checks its lease at 900ms and stalls past its 1s
// TTL, the next holder takes the resource over, checks at 1200ms and
// stalls too, and both stalls end together: the new holder writes at
// 1300ms, the old one a millisecond later. A gate whose check and write
// are one operation refuses the old write or admits it first; one that
// checks, then writes and raises its floor even 3ms later, lets it land
// after the new one. overlap's stalls rarely end that close.
func contend(pairs int) Scenario {
	sc := Scenario{
		Name: "contend",
		Description: fmt.Sprintf("%d pairs of holders whose stalls end together: the lapsed holder writes 1ms after the new one, "+
			"so commits contend at the gate", pairs),
		Seed: 1, Duration: 2 * time.Second, Agents: 2 * pairs, Resources: pairs, TTL: time.Second,
		Agent: Behaviour{WritesPerLease: 1},
	}
	for p := range pairs {
		old, cur, res := AgentName(2*p), AgentName(2*p+1), ResourceName(p)
		sc.Script = append(sc.Script,
			Action{At: 0, Agent: old, Do: ActAcquire, Resource: res},
			Action{At: 900 * time.Millisecond, Agent: old, Do: ActCheck},
			Action{At: 900 * time.Millisecond, Agent: old, Do: ActStall, Duration: 401 * time.Millisecond},
			Action{At: 1100 * time.Millisecond, Agent: cur, Do: ActAcquire, Resource: res},
			Action{At: 1200 * time.Millisecond, Agent: cur, Do: ActCheck},
			Action{At: 1200 * time.Millisecond, Agent: cur, Do: ActStall, Duration: 100 * time.Millisecond},
			Action{At: 1300 * time.Millisecond, Agent: cur, Do: ActWrite},
			Action{At: 1301 * time.Millisecond, Agent: old, Do: ActWrite},
		)
	}
	return sc
}

// base is the small contended world the fault scenarios start from.
func base(name, desc string) Scenario {
	return Scenario{
		Name: name, Description: desc,
		Seed: 1, Duration: 30 * time.Second, Agents: 6, Resources: 2, TTL: time.Second,
		ClockSkew: 5 * time.Millisecond,
		Agent: Behaviour{
			Think: Uniform(20*time.Millisecond, 200*time.Millisecond),
			Stall: Dist{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond, TailP: 0.1,
				TailMin: 900 * time.Millisecond, TailMax: 2 * time.Second},
			WorkGap: Uniform(10*time.Millisecond, 50*time.Millisecond), WritesPerLease: 3, RenewAt: 0.5, Release: true,
		},
		Network: Network{RequestDelay: Uniform(time.Millisecond, 8*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 8*time.Millisecond)},
	}
}

// Builtin returns a fresh copy of the named built-in scenario.
func Builtin(name string) (Scenario, bool) {
	f, ok := builtins[name]
	if !ok {
		return Scenario{}, false
	}
	return f(), true
}

// BuiltinNames lists the built-in scenarios, the default first, then by name.
func BuiltinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		if n != DefaultScenario {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return append([]string{DefaultScenario}, names...)
}

// LockDelayScenario is the built-in "lock-delay": holders whose stall
// between check and write is a model call's latency, log-normal with a
// median of 300ms and a p99 of 4s (four TTLs), so that about 1 write in 7
// stalls past its 1s lease and lands late. Its naive mode is a resource
// that cannot check a fence: every write lands, as an API or a payment
// call would take it. Run with lock_delay 0 and above, it shows what a
// lock-delay buys (fewer stale writes landed: the next holder starts
// later) and what it costs (idle_while_waiting_ms).
func LockDelayScenario() Scenario {
	return Scenario{
		Name: "lock-delay",
		Description: "model-call stalls, log-normal (median 300ms, p99 4s) against a 1s TTL; naive is a resource that cannot check a fence " +
			"(every write lands); set lock_delay to see what it buys and costs",
		Seed: 1, Duration: 2 * time.Minute, Agents: 4, Resources: 1, TTL: time.Second,
		ClockSkew: 10 * time.Millisecond,
		Agent: Behaviour{
			Think:          Uniform(50*time.Millisecond, 300*time.Millisecond),
			Stall:          Dist{LogNormal: LogNormal{Median: 300 * time.Millisecond, P99: 4 * time.Second}},
			WritesPerLease: 1, RenewAt: 0.5, Release: true,
		},
		Network: Network{RequestDelay: Uniform(time.Millisecond, 5*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond)},
	}
}
