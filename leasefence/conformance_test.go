package leasefence_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// memoryGate is the in-memory FenceGate under the conformance suite: its
// write appends to a slice that only the gate's writes touch.
func memoryGate(resource string) leasetest.GateHarness {
	g := leasefence.NewFenceGate(resource)
	var mu sync.Mutex // for Written, read from outside the gate
	var written []string
	return leasetest.GateHarness{
		Gate: leasefence.AsGate(g),
		Commit: func(ctx context.Context, t leasefence.Token, value string) error {
			return g.Commit(ctx, t, func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				written = append(written, value)
				return nil
			})
		},
		Written: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(written), nil
		},
	}
}

func TestFenceGateConformance(t *testing.T) {
	leasetest.TestGate(t, func(_ testing.TB, resource string) leasetest.GateHarness { return memoryGate(resource) })
}
