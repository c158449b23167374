package leasefence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leasefence/lab/leasefence"
)

// Every client, coordinator and gate refuses an id that breaks the rule
// before it sends or stores anything, with the same *IDError.
func ExampleValidateID() {
	for _, id := range []string{"worker-a", "", strings.Repeat("w", 2000), "worker-\xff", "worker-a\n"} {
		err := leasefence.ValidateID(leasefence.IDHolder, id)
		var ide *leasefence.IDError
		if errors.As(err, &ide) {
			fmt.Printf("%d bytes: %s (ErrInvalidRequest: %v)\n", ide.Len, ide.Why, errors.Is(err, leasefence.ErrInvalidRequest))
			continue
		}
		fmt.Printf("%q: ok\n", id)
	}
	gate := leasefence.NewFenceGate("orders")
	err := gate.Commit(context.Background(), leasefence.Token{Resource: "orders", Holder: "worker-\xff", Fence: 1}, func(context.Context) error { return nil })
	fmt.Println("Commit:", errors.Is(err, leasefence.ErrInvalidRequest), gate.RejectionCount())
	// Output:
	// "worker-a": ok
	// 0 bytes: is empty (ErrInvalidRequest: true)
	// 2000 bytes: is longer than MaxIDLen (1024 bytes) (ErrInvalidRequest: true)
	// 8 bytes: is not valid UTF-8 (ErrInvalidRequest: true)
	// 9 bytes: has a control character (U+000A at byte 8) (ErrInvalidRequest: true)
	// Commit: true 0
}

// A durable gate answers a refusal it could not log with a
// *RefusalNotLoggedError: the write did not land, as for any refusal, but
// the gate's log does not hold it.
func ExampleRefusalNotLoggedError() {
	var err error = &leasefence.RefusalNotLoggedError{
		Rejection: leasefence.Rejection{Resource: "orders", Holder: "worker-a", Fence: 5, FloorHolder: "worker-b", FloorFence: 7},
		Err:       context.Canceled,
	}
	var nl *leasefence.RefusalNotLoggedError
	if errors.As(err, &nl) {
		fmt.Printf("refused: %s@%d wrote first; logged: false; why: %v\n", nl.FloorHolder, nl.FloorFence, nl.Err)
	}
	fmt.Println(errors.Is(err, leasefence.ErrRefusalNotLogged), errors.Is(err, leasefence.ErrStaleFence), errors.Is(err, context.Canceled))
	// Output:
	// refused: worker-b@7 wrote first; logged: false; why: context canceled
	// true false true
}
