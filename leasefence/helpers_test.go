package leasefence_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// newCoordinator returns a coordinator on clock with ttl, failing the test
// on an error.
func newCoordinator(t testing.TB, clock leasefence.Clock, ttl time.Duration) *leasefence.Coordinator {
	t.Helper()
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
	if err != nil {
		t.Fatalf("NewCoordinator: %v", err)
	}
	return c
}

// newClient returns a client for holder on clock with skew.
func newClient(t testing.TB, clock leasefence.Clock, holder string, skew time.Duration) *leasefence.Client {
	t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: holder, ClockSkew: skew})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// acquireLease runs one begin/acquire/complete round trip with no time
// passing in between, and fails the test unless it is granted.
func acquireLease(t testing.TB, client *leasefence.Client, coord *leasefence.Coordinator, resource string) (*leasefence.Lease, leasefence.Grant) {
	t.Helper()
	req, err := client.BeginAcquire(resource)
	if err != nil {
		t.Fatalf("BeginAcquire: %v", err)
	}
	out, err := coord.Acquire(req)
	if err != nil || !out.OK {
		t.Fatalf("Acquire(%+v) = %+v, %v", req, out, err)
	}
	lease, err := client.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatalf("CompleteAcquire: %v", err)
	}
	return lease, out.Grant
}

// tok builds a token.
func tok(resource, holder string, fence leasefence.Fence) leasefence.Token {
	return leasefence.Token{Resource: resource, Holder: holder, Fence: fence}
}

// ms is shorthand for n milliseconds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
