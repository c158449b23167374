package labtest_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/labtest"
)

// A test in the module that holds your lock puts it under the lab: here
// the in-memory lock of this package's tests, whose leases carry a fence,
// so its holders write through the resource's gate. A lock that broke
// mutual exclusion, or let a stale write land, fails the test with the
// first counterexample and the path of the run's history, which
// `lab check PATH` judges again.
func ExampleRun() {
	testMyLock := func(t *testing.T) {
		res := labtest.Run(t, "overlap", newMemLock(), labtest.Duration(10*time.Second))
		t.Logf("%s: %d stale writes, %d mutual-exclusion violations, %d writes refused by the gate",
			res.Mode, res.StaleWritesLanded, res.MutualExclusionViolations, res.CommitsRefused)
	}
	_ = testMyLock
}
