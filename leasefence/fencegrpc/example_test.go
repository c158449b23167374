package fencegrpc_test

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/status"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencegrpc"
)

// A handler returns Status(err) for its gate's refusal; the client's
// Refusal gives back the same typed error, so errors.As works across the
// call.
func ExampleStatus() {
	gate := leasefence.NewFenceGate("deploy/prod")
	_ = gate.Admit(leasefence.Token{Resource: "deploy/prod", Holder: "agent-b", Fence: 2})
	err := gate.Commit(context.Background(), leasefence.Token{Resource: "deploy/prod", Holder: "agent-a", Fence: 1},
		func(context.Context) error { return nil })
	onTheWire := fencegrpc.Status(err) // what the server's handler returns
	fmt.Println(status.Code(onTheWire))

	var stale *leasefence.StaleFenceError
	if errors.As(fencegrpc.Refusal(onTheWire), &stale) { // on the client
		fmt.Printf("refused: %s@%d, floor %s@%d (refusal %d)\n", stale.Holder, stale.Fence, stale.FloorHolder, stale.FloorFence, stale.Seq)
	}
	// Output:
	// FailedPrecondition
	// refused: agent-a@1, floor agent-b@2 (refusal 1)
}
