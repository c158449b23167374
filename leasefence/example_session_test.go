package leasefence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// How a new holder closes the window before it has written: Hold admits
// its token at the resource's gate before it returns, so the previous
// holder's late write is refused from then on. Without the option, the
// same is one line after Hold:
//
//	err = leasefence.AsGate(gate).Admit(ctx, session.Token())
func ExampleHoldOptions_admitAt() {
	ctx := context.Background()
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: time.Minute})
	svc := leasefence.Local(coord)
	gate := leasefence.NewFenceGate("deploy-slot")
	client := func(holder string) *leasefence.Client {
		c, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
		return c
	}

	// worker-a held the slot, and is about to write late: its lease has
	// gone (released here; expired, in the story this is about).
	old, _ := leasefence.Hold(ctx, svc, client("worker-a"), "deploy-slot", leasefence.HoldOptions{})
	stale := old.Token()
	_, _ = old.Release(ctx)

	session, err := leasefence.Hold(ctx, svc, client("worker-b"), "deploy-slot", leasefence.HoldOptions{
		AdmitAt: []leasefence.Gate{leasefence.AsGate(gate)},
	})
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer session.Release(ctx)

	err = gate.Commit(ctx, stale, func(context.Context) error {
		fmt.Println("the late write landed") // never printed
		return nil
	})
	fmt.Println("late write refused:", errors.Is(err, leasefence.ErrStaleFence))
	fmt.Println("floor:", gate.Floor())
	// Output:
	// late write refused: true
	// floor: worker-b@2 on "deploy-slot"
}

// Session.Context ends when the session does, with the reason as its
// cause: work started under it stops when the lease is gone.
func ExampleSession_Context() {
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: time.Minute})
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("worker-a"), Holder: "worker-a"})
	session, err := leasefence.Hold(context.Background(), leasefence.Local(coord), client, "deploy-slot", leasefence.HoldOptions{})
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	work, cancel := context.WithCancel(session.Context())
	defer cancel()

	_, _ = session.Release(context.Background())
	<-work.Done()
	fmt.Println(context.Cause(work))
	fmt.Println(errors.Is(session.Err(), leasefence.ErrReleased), errors.Is(session.Err(), leasefence.ErrLeaseLost))
	// Output:
	// lease on deploy-slot released by its holder (holder worker-a, fence 1)
	// true true
}

// TryHold makes one attempt and says who is in the way.
func ExampleTryHold() {
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: time.Minute})
	svc := leasefence.Local(coord)
	a, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("worker-a"), Holder: "worker-a"})
	b, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("worker-b"), Holder: "worker-b"})
	first, _ := leasefence.TryHold(context.Background(), svc, a, "deploy-slot", leasefence.HoldOptions{})
	defer first.Release(context.Background())

	_, err := leasefence.TryHold(context.Background(), svc, b, "deploy-slot", leasefence.HoldOptions{})
	var held *leasefence.HeldError
	if errors.As(err, &held) {
		fmt.Println("held by", held.HeldBy)
	}
	if hr, ok := svc.(leasefence.HolderReader); ok {
		t, live, _ := hr.Holder(context.Background(), "deploy-slot")
		fmt.Println("holder:", t, live)
	}
	// Output:
	// held by worker-a
	// holder: worker-a@1 on "deploy-slot" true
}
