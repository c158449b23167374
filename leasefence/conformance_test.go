package leasefence_test

import (
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
)

func TestFenceGateConformance(t *testing.T) {
	leasetest.TestGate(t, func(_ testing.TB, resource string) leasetest.GateHarness {
		return leasetest.FenceGateHarness(leasefence.NewFenceGate(resource))
	})
}
