package spec

import "time"

// BatteryScenario is one scenario of the default battery: a scenario to
// run as it is, and the class of bug it is there to catch.
type BatteryScenario struct {
	Name     string
	Catches  string
	Scenario Scenario
}

// Battery is the default battery, in the order it runs: scenarios chosen
// so that together they exercise every path a lock has (contention, expiry
// under a paused holder, renewal and renewal after expiry, release, a late
// release after a takeover, lost, duplicated and delayed replies, retried
// acquires). None scripts an action per known bug: each draws its faults
// from its seed (stalls past the TTL, lost, duplicated and delayed
// messages), as a swarm draws a seed's. Each is 1s TTL, 7s long, a fresh
// copy per call. The last, restart, restarts the coordinator: only a lock
// whose server the lab can restart plays it (registry.Restarts); the
// others leave it out, with a note. labtest.Check and lab run battery run
// this one list.
func Battery() []BatteryScenario {
	return []BatteryScenario{
		{Name: "contention", Catches: "a lock that grants a resource while it is held, or whose Deadline lies past the server's expiry: " +
			"a mutual-exclusion violation at a takeover",
			Scenario: batteryScenario("contention", "6 holders on one resource, 1 stall in 5 past the TTL: contended grants and takeovers",
				11, 6, 1, 0.2, Network{RequestDelay: Uniform(time.Millisecond, 5*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond)})},
		{Name: "paused-holder", Catches: "a Renew that takes back a key it lost, a Release that deletes the key whoever holds it (unconditional DEL), " +
			"a nil answer to Renew or Release of a lease no longer live: the lease contract, and the exclusion a late release breaks",
			Scenario: batteryScenario("paused-holder", "4 holders on two resources, 2 stalls in 5 past the TTL: the paused holder renews and releases after a takeover",
				12, 4, 2, 0.4, Network{RequestDelay: Uniform(time.Millisecond, 5*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond)})},
		{Name: "slow-replies", Catches: "a Deadline counted from a late reply, past the server's expiry: a mutual-exclusion violation",
			Scenario: slowReplies()},
		{Name: "lost-replies", Catches: "a lock that grants twice when an acquire is retried after its reply was lost (a re-entrant grant to the same holder), " +
			"a release that frees a newer lease when it arrives twice or late",
			Scenario: batteryScenario("lost-replies", "1 reply in 5 and 1 request in 10 lost, 1 in 5 delivered twice up to 150ms late; acquires retried",
				14, 4, 1, 0.15, Network{RequestDelay: Uniform(time.Millisecond, 150*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 20*time.Millisecond),
					DropRequests: 0.1, DropReplies: 0.2, Duplicate: 0.2, RetryAfter: 200 * time.Millisecond, MaxRetries: 4})},
		{Name: "restart", Catches: "a coordinator that forgets its fence counter on a restart: a fence reused",
			Scenario: restartScenario()},
	}
}

// batteryScenario is a battery's contended world: agents on resources,
// stalls past the TTL with probability tailP, every lease renewed halfway
// and released after its writes, over the network given.
func batteryScenario(name, desc string, seed uint64, agents, resources int, tailP float64, net Network) Scenario {
	return Scenario{
		Name: name, Description: desc, Seed: seed, Duration: 7 * time.Second,
		Agents: agents, Resources: resources, TTL: time.Second, ClockSkew: 5 * time.Millisecond,
		Agent: Behaviour{
			Think: Uniform(20*time.Millisecond, 150*time.Millisecond),
			Stall: Dist{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond, TailP: tailP,
				TailMin: 1200 * time.Millisecond, TailMax: 2500 * time.Millisecond},
			WorkGap: Uniform(10*time.Millisecond, 60*time.Millisecond), WritesPerLease: 3, RenewAt: 0.5, Release: true,
		},
		Network: net,
	}
}

// slowReplies holds leases over several TTLs by renewals whose replies
// come back up to 300ms late.
func slowReplies() Scenario {
	sc := batteryScenario("slow-replies", "leases held over several TTLs by renewals whose replies come back up to 300ms late",
		13, 3, 1, 0.1, Network{RequestDelay: Uniform(time.Millisecond, 40*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 300*time.Millisecond)})
	sc.Agent.WritesPerLease, sc.Agent.WorkGap, sc.Agent.RenewAt = 6, Uniform(100*time.Millisecond, 300*time.Millisecond), 0.3
	return sc
}

// restartScenario restarts the coordinator at 3s without its fence counter.
func restartScenario() Scenario {
	sc := batteryScenario("restart", "the coordinator restarts at 3s without persisting its fence counter",
		15, 4, 1, 0.2, Network{RequestDelay: Uniform(time.Millisecond, 5*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond)})
	sc.Restarts = []Restart{{At: 3 * time.Second}}
	return sc
}
