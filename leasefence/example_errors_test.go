package leasefence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// commitOutcome is how a writer tells Commit's errors apart: the README's
// error handling.
func commitOutcome(err error) string {
	var stale *leasefence.StaleFenceError
	switch {
	case err == nil:
		return "written"
	case errors.As(err, &stale):
		// A newer holder raised the floor: this lease is over. Stop, and
		// acquire again before writing.
		return fmt.Sprintf("stale: %s@%d wrote first", stale.FloorHolder, stale.FloorFence)
	case errors.Is(err, leasefence.ErrTokenConflict):
		// The floor's own fence under another holder: a coordinator that
		// restarted without its fence counter minted it again. No retry
		// makes it safe; persist IssuedFence and restart with StartFence.
		return "conflict: the fence was issued twice"
	case errors.Is(err, leasefence.ErrWrongResource), errors.Is(err, leasefence.ErrInvalidRequest),
		errors.Is(err, leasefence.ErrUninitialized):
		// A bug in the caller: a token for another gate, a nil ctx or
		// write, a zero FenceGate. Nothing was written or logged.
		return "misuse: " + err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// ctx ended while another write held the gate: nothing written,
		// the floor unchanged; the lease may still be good.
		return "gave up waiting"
	default:
		// The write's own error, returned as is. The floor was raised
		// before it ran and stays raised.
		return "the write failed: " + err.Error()
	}
}

// Telling Commit's errors apart: a stale fence (a newer holder wrote), a
// token conflict (a coordinator restarted without its fence counter
// issued the floor's fence again), misuse, and the write's own error.
func ExampleFenceGate_Commit_errors() {
	ctx := context.Background()
	clock := leasefence.NewManualClock("coordinator")
	gate := leasefence.NewFenceGate("orders")
	acquire := func(coord *leasefence.Coordinator, holder string) leasefence.Token {
		c, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: holder})
		req, _ := c.BeginAcquire("orders")
		out, _ := coord.Acquire(req)
		lease, _ := c.CompleteAcquire(req, out.Grant)
		return lease.Token
	}
	ok := func(context.Context) error { return nil }

	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second})
	a := acquire(coord, "worker-a")
	fmt.Println("worker-a:", commitOutcome(gate.Commit(ctx, a, ok)))
	clock.Advance(2 * time.Second) // worker-a's lease lapses
	b := acquire(coord, "worker-b")
	fmt.Println("worker-b:", commitOutcome(gate.Commit(ctx, b, ok)))
	fmt.Println("worker-a:", commitOutcome(gate.Commit(ctx, a, ok)))

	// The coordinator restarts without persisting its fence counter: it
	// mints fences 1 and 2 again, for other holders.
	restarted, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second})
	c := acquire(restarted, "worker-c")
	clock.Advance(2 * time.Second)
	d := acquire(restarted, "worker-d")
	fmt.Println("worker-c:", commitOutcome(gate.Commit(ctx, c, ok)))
	fmt.Println("worker-d:", commitOutcome(gate.Commit(ctx, d, ok)))

	fmt.Println("nil write:", commitOutcome(gate.Commit(ctx, b, nil)))
	fmt.Println("worker-b:", commitOutcome(gate.Commit(ctx, b, func(context.Context) error { return errors.New("disk full") })))
	// Output:
	// worker-a: written
	// worker-b: written
	// worker-a: stale: worker-b@2 wrote first
	// worker-c: stale: worker-b@2 wrote first
	// worker-d: conflict: the fence was issued twice
	// nil write: misuse: leasefence: invalid request: Commit with a nil write
	// worker-b: the write failed: disk full
}
