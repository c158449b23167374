package leasefence_test

import (
	"fmt"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// A lock-delay for a resource that cannot check a fence (a payment API):
// after agent-a's lease expires, nobody is granted the resource for 15s, so
// that a call agent-a's stalled process still has in flight most likely
// lands first. A release is not delayed.
func Example_lockDelay() {
	clock := leasefence.NewManualClock("coordinator")
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: 10 * time.Second, LockDelay: 15 * time.Second})
	ask := func(id, holder string) leasefence.Token {
		out, _ := coord.Acquire(leasefence.AcquireRequest{RequestID: id, Holder: holder, Resource: "payments"})
		if out.OK {
			fmt.Printf("%s: granted fence %d\n", holder, out.Grant.Token.Fence)
		} else {
			fmt.Printf("%s: %s, retry after %v\n", holder, out.Reason, out.RetryAfter)
		}
		return out.Grant.Token
	}
	ask("req-1", "agent-a")         // then agent-a's process stalls: no renewal
	clock.Advance(10 * time.Second) // its lease expires
	ask("req-2", "agent-b")
	ask("req-3", "agent-a")         // not its own lease back either
	clock.Advance(15 * time.Second) // the delay has passed
	b := ask("req-4", "agent-b")
	_, _ = coord.Release(b)
	ask("req-5", "agent-a") // after a release, at once
	// Output:
	// agent-a: granted fence 1
	// agent-b: lock-delay, retry after 15s
	// agent-a: lock-delay, retry after 15s
	// agent-b: granted fence 2
	// agent-a: granted fence 3
}
