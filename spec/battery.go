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
// messages), as a swarm draws a seed's. Each has a 1s TTL and lasts 7s
// (paused-holder 8s); each call returns fresh copies. The last, restart, restarts the coordinator: only a lock
// whose server the lab can restart plays it (registry.Restarts); the
// others leave it out, with a note. labtest.Check and lab run battery run
// this one list.
func Battery() []BatteryScenario {
	return []BatteryScenario{
		{Name: "contention", Catches: "a lock that grants a resource while it is held, or whose Deadline lies past the server's expiry: " +
			"a mutual-exclusion violation at a takeover",
			Scenario: batteryScenario("contention", "6 holders on one resource, 1 stall in 5 past the TTL: contended grants and takeovers",
				11, 6, 1, 0.2, Network{RequestDelay: Uniform(time.Millisecond, 5*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond)})},
		{Name: "paused-holder", Catches: "a Renew that takes back a key it lost, or answers nil for a lease no longer live: the lease contract; " +
			"a lease that never ends under a paused holder",
			Scenario: pausedHolder()},
		{Name: "slow-replies", Catches: "a Deadline counted from a late reply, past the server's expiry: a mutual-exclusion violation",
			Scenario: slowReplies()},
		{Name: "lost-replies", Catches: "a lock that grants twice when an acquire is retried after its reply was lost (a re-entrant grant to the same holder)",
			Scenario: batteryScenario("lost-replies", "4 holders on four resources, 1 reply in 4 and 1 request in 10 lost; acquires retried under the same request",
				14, 4, 4, 0.15, Network{RequestDelay: Uniform(time.Millisecond, 20*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 20*time.Millisecond),
					DropRequests: 0.1, DropReplies: 0.25, RetryAfter: 100 * time.Millisecond, MaxRetries: 4})},
		{Name: "duplicates", Catches: "a Release that frees the key whoever holds it (unconditional DEL) or by its holder's name: a release delivered again, " +
			"late, after the lease was taken over or taken again, frees a newer lease; a nil answer to Release of a lease no longer live",
			Scenario: duplicates()},
		{Name: "restart", Catches: "a coordinator that forgets its fence counter on a restart: a fence reused",
			Scenario: restartScenario()},
	}
}

// batteryScenario is a battery's contended world: agents on resources,
// stalls past the TTL with probability tailP, every lease renewed at 0.3
// of its TTL and released after its writes, over the network given.
func batteryScenario(name, desc string, seed uint64, agents, resources int, tailP float64, net Network) Scenario {
	return Scenario{
		Name: name, Description: desc, Seed: seed, Duration: 7 * time.Second,
		Agents: agents, Resources: resources, TTL: time.Second, ClockSkew: 5 * time.Millisecond,
		Agent: Behaviour{
			Think: Uniform(20*time.Millisecond, 150*time.Millisecond),
			Stall: Dist{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond, TailP: tailP,
				TailMin: 1200 * time.Millisecond, TailMax: 2500 * time.Millisecond},
			WorkGap: Uniform(10*time.Millisecond, 60*time.Millisecond), WritesPerLease: 3, RenewAt: 0.3, Release: true,
		},
		Network: net,
	}
}

// pausedHolder stalls half the writes just past the TTL, each holder
// bound to a resource (PickFixed), two sharing the first: a lease often
// ends under its paused holder with no one taking it over, so the
// holder's write still lands (no newer fence reached the gate) and it
// renews a lease that has ended (its first write stalled); on the shared
// resource the paused holder finds its lease taken over.
func pausedHolder() Scenario {
	sc := batteryScenario("paused-holder", "6 holders on three resources, two on each, half the writes stalled past the TTL: the paused holder renews and releases after its lease ended",
		12, 6, 3, 0.5, Network{RequestDelay: Uniform(time.Millisecond, 5*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond)})
	sc.Pick, sc.Duration, sc.Agent.WritesPerLease = PickFixed, 8*time.Second, 2
	sc.Agent.Stall.TailMin, sc.Agent.Stall.TailMax = 1100*time.Millisecond, 1600*time.Millisecond
	return sc
}

// duplicates delivers 2 requests in 5 twice, 10-150ms apart, to short
// leases each released after one write, two holders bound to each
// resource (PickFixed) taking it again within tens of milliseconds: many
// releases, and as many late copies of them, some reaching the lock once
// their holder, or the other, has the resource again.
func duplicates() Scenario {
	sc := batteryScenario("duplicates", "2 requests in 5 delivered twice, 10-150ms late; each lease released after one write",
		16, 4, 2, 0.1, Network{RequestDelay: Uniform(10*time.Millisecond, 150*time.Millisecond), ReplyDelay: Uniform(time.Millisecond, 5*time.Millisecond),
			Duplicate: 0.4})
	sc.Pick, sc.Agent.WritesPerLease, sc.Agent.Think = PickFixed, 1, Uniform(5*time.Millisecond, 40*time.Millisecond)
	return sc
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
