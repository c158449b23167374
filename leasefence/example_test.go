package leasefence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// The explicit pieces (docs/library.md): a coordinator, a client, a gate at the resource,
// and one write through it.
func Example() {
	ctx := context.Background()
	applyTheChange := func(ctx context.Context) error {
		fmt.Println("applying the change")
		return nil
	}

	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: 30 * time.Second})
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-a"), Holder: "agent-a", ClockSkew: 500 * time.Millisecond})
	gate := leasefence.NewFenceGate("deploy-slot")

	req, _ := client.BeginAcquire("deploy-slot") // stamps the instant this was sent
	out, _ := coord.Acquire(req)                 // the far side of the wire
	if !out.OK {
		fmt.Printf("held by %s, free in %v\n", out.HeldBy, out.RetryAfter)
		return
	}
	lease, _ := client.CompleteAcquire(req, out.Grant)
	err := gate.Commit(ctx, lease.Token, func(ctx context.Context) error { return applyTheChange(ctx) })

	fmt.Println("commit:", err)
	fmt.Println("lease:", lease.Token, "for", lease.TTL)
	fmt.Println("floor:", gate.Floor())

	// A second agent asking now is told who holds it.
	other, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-b"), Holder: "agent-b"})
	req2, _ := other.BeginAcquire("deploy-slot")
	out2, _ := coord.Acquire(req2)
	fmt.Println("agent-b:", out2.OK, out2.Reason, out2.HeldBy)
	// Output:
	// applying the change
	// commit: <nil>
	// lease: agent-a@1 on "deploy-slot" for 30s
	// floor: agent-a@1 on "deploy-slot"
	// agent-b: false held agent-a
}

// A holder that stalled past its lease writes after the resource was
// reassigned: the gate refuses it and logs both holders and both fences.
func ExampleFenceGate_Commit() {
	ctx := context.Background()
	coordClock := leasefence.NewManualClock("coordinator")
	aClock := leasefence.NewManualClock("agent-a")
	bClock := leasefence.NewManualClock("agent-b")
	elapse := func(d time.Duration) { coordClock.Advance(d); aClock.Advance(d); bClock.Advance(d) }

	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: coordClock, TTL: time.Second})
	a, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: aClock, Holder: "agent-a"})
	b, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: bClock, Holder: "agent-b"})
	gate := leasefence.NewFenceGate("deploy-slot")
	write := func(who string) func(context.Context) error {
		return func(context.Context) error { fmt.Println(who, "wrote"); return nil }
	}

	// t=0: agent-a acquires.
	reqA, _ := a.BeginAcquire("deploy-slot")
	outA, _ := coord.Acquire(reqA)
	leaseA, _ := a.CompleteAcquire(reqA, outA.Grant)

	// t=950ms: agent-a checks, and its lease looks valid. Then it stalls.
	elapse(950 * time.Millisecond)
	expired, _ := leaseA.HasExpired()
	fmt.Println("t=950ms agent-a expired:", expired)

	// t=1000ms: the coordinator expires agent-a; agent-b acquires and writes.
	elapse(50 * time.Millisecond)
	reqB, _ := b.BeginAcquire("deploy-slot")
	outB, _ := coord.Acquire(reqB)
	leaseB, _ := b.CompleteAcquire(reqB, outB.Grant)
	if err := gate.Commit(ctx, leaseB.Token, write("agent-b")); err != nil {
		fmt.Println(err)
	}

	// t=1400ms: agent-a's write lands.
	elapse(400 * time.Millisecond)
	err := gate.Commit(ctx, leaseA.Token, write("agent-a"))
	var stale *leasefence.StaleFenceError
	fmt.Println("agent-a stale:", errors.As(err, &stale))
	fmt.Println(err)
	for _, r := range gate.Rejections() {
		fmt.Printf("rejection %d on %s: %s@%d refused, floor %s@%d\n", r.Seq, r.Resource, r.Holder, r.Fence, r.FloorHolder, r.FloorFence)
	}
	// Output:
	// t=950ms agent-a expired: false
	// agent-b wrote
	// agent-a stale: true
	// leasefence: stale fence at "deploy-slot": agent-a@1 refused, floor is agent-b@2
	// rejection 1 on deploy-slot: agent-a@1 refused, floor agent-b@2
}

// Instants of two clocks cannot be related: the answer is an error, never a
// number shaped like a duration.
func ExampleInstant_Sub() {
	agent := leasefence.NewManualClock("agent-a", leasefence.WithStart(1250*time.Millisecond))
	coord := leasefence.NewManualClock("coordinator", leasefence.WithStart(40*time.Millisecond))

	sent, _ := agent.Now()
	agent.Advance(860 * time.Millisecond)
	replied, _ := agent.Now()
	d, err := replied.Sub(sent)
	fmt.Println(replied, "-", sent, "=", d, err)

	processed, _ := coord.Now()
	_, err = processed.Sub(sent)
	fmt.Println(err)
	var de *leasefence.ClockDomainError
	fmt.Println(errors.Is(err, leasefence.ErrClockDomain), errors.As(err, &de), de.Left, de.Right)
	// Output:
	// agent-a+2.11s - agent-a+1.25s = 860ms <nil>
	// leasefence: cannot relate an instant of clock "coordinator" to one of clock "agent-a": clocks have unrelated origins
	// true true coordinator agent-a
}

// WithStepPerRead moves time on every read, so a check and the write after
// it never observe the same instant.
func ExampleWithStepPerRead() {
	clock := leasefence.NewManualClock("agent-a", leasefence.WithStart(999*time.Millisecond), leasefence.WithStepPerRead(time.Millisecond))
	check, _ := clock.Now()
	write, _ := clock.Now()
	gap, _ := write.Sub(check)
	fmt.Println(check, write, gap)
	// Output:
	// agent-a+999ms agent-a+1s 1ms
}

// A renewal keeps the fence; the deadline is anchored at the renewal's send
// instant, not at the reply's arrival.
func ExampleClient_CompleteRenewal() {
	coordClock := leasefence.NewManualClock("coordinator")
	agent := leasefence.NewManualClock("agent-a")
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: coordClock, TTL: time.Second})
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: agent, Holder: "agent-a"})

	req, _ := client.BeginAcquire("r")
	out, _ := coord.Acquire(req)
	lease, _ := client.CompleteAcquire(req, out.Grant)

	agent.Advance(500 * time.Millisecond)
	coordClock.Advance(500 * time.Millisecond)
	rreq, _ := client.BeginRenewal(lease) // sent at agent-a+500ms
	coordClock.Advance(40 * time.Millisecond)
	rout, _ := coord.Renew(rreq) // processed 40ms later
	agent.Advance(900 * time.Millisecond)
	renewed, _ := client.CompleteRenewal(rreq, rout.Grant) // answered 900ms after sending

	fmt.Println(renewed.Token, renewed.Deadline, rout.Grant.CoordinatorExpiresAt)
	_, err := client.CompleteRenewal(rreq, rout.Grant)
	fmt.Println(errors.Is(err, leasefence.ErrRequestUsed))
	// Output:
	// agent-a@1 on "r" agent-a+1.5s coordinator+1.54s
	// true
}

// Hold is what a holder runs: it acquires (waiting out another holder,
// resending a request whose reply was lost), renews in the background, and
// closes Lost when the lease can no longer be trusted.
func ExampleHold() {
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: 10 * time.Second})
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-a"), Holder: "agent-a"})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds the acquisition only
	defer cancel()
	session, err := leasefence.Hold(ctx, leasefence.Local(coord), client, "deploy-slot", leasefence.HoldOptions{})
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	fmt.Println("holding with", session.Token())

	select {
	case <-session.Lost():
		fmt.Println("lost:", session.Err()) // stop starting work
	default:
		fmt.Println("still held") // ...do the work, writing through the resource's gate
	}

	out, _ := session.Release(context.Background())
	fmt.Println("released:", out.OK, errors.Is(session.Err(), leasefence.ErrLeaseLost))
	// Output:
	// holding with agent-a@1 on "deploy-slot"
	// still held
	// released: true true
}

// A long-running reader of a gate's refusal log: it keeps the Seq of the
// last refusal it read, and learns how many it missed when it fell further
// behind than the gate retains.
func ExampleFenceGate_RejectionsSince() {
	gate := leasefence.NewFenceGate("deploy-slot", leasefence.WithInitialFloor(10), leasefence.WithRejectionLog(2))
	stale := leasefence.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 9}
	refuse := func(n int) {
		for range n {
			_ = gate.Commit(context.Background(), stale, func(context.Context) error { return nil })
		}
	}
	var last uint64
	read := func() {
		rs, missed := gate.RejectionsSince(last)
		for _, r := range rs {
			fmt.Printf("refusal #%d: %s@%d below %d\n", r.Seq, r.Holder, r.Fence, r.FloorFence)
			last = r.Seq
		}
		if missed > 0 {
			fmt.Printf("missed %d\n", missed)
		}
	}
	refuse(1)
	read()
	refuse(4)
	read()
	fmt.Println("counted:", gate.RejectionCount())
	// Output:
	// refusal #1: agent-a@9 below 10
	// refusal #4: agent-a@9 below 10
	// refusal #5: agent-a@9 below 10
	// missed 2
	// counted: 5
}
