package leasetest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// The in-memory coordinator, on a manual clock, through Local.
func TestLocal(t *testing.T) {
	leasetest.TestService(t, func(t *testing.T) leasetest.Harness {
		clock := leasefence.NewManualClock("coordinator")
		const ttl = 3 * time.Second
		coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return leasetest.Harness{Service: leasefence.Local(coord), TTL: ttl, Elapse: clock.Advance}
	})
}

// forgetfulService gives every acquire a fresh request id, as a coordinator
// without idempotent retries would: a retried request mints a new grant.
type forgetfulService struct {
	leasefence.Service
	n  int
	mu sync.Mutex
}

func (s *forgetfulService) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	s.mu.Lock()
	s.n++
	suffix := fmt.Sprintf("-%d", s.n)
	s.mu.Unlock()
	req.RequestID += suffix
	out, err := s.Service.Acquire(ctx, req)
	out.Grant.RequestID = strings.TrimSuffix(out.Grant.RequestID, suffix)
	return out, err
}

// TestBrokenService is the control: run in a child process by
// TestSuiteCatchesABrokenService, it must fail.
func TestBrokenService(t *testing.T) {
	if os.Getenv("LEASETEST_BROKEN") != "1" {
		return // only the control's child process runs it
	}
	leasetest.TestService(t, func(t *testing.T) leasetest.Harness {
		clock := leasefence.NewManualClock("coordinator")
		coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return leasetest.Harness{Service: &forgetfulService{Service: leasefence.Local(coord)}, TTL: time.Second, Elapse: clock.Advance}
	})
}

func TestSuiteCatchesABrokenService(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenService$", "-test.v")
	cmd.Env = append(os.Environ(), "LEASETEST_BROKEN=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a coordinator without idempotent retries:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestBrokenService/IdempotentRetry", "--- FAIL: TestBrokenService/StaleRequest", "--- PASS: TestBrokenService/Held"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}
