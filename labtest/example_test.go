package labtest_test

import (
	"testing"
	"time"

	"github.com/leasefence/lab/labtest"
)

// A test in the module that holds your lock puts it under the lab: here
// the in-memory lock of this package's tests, whose leases carry a fence,
// so its holders write through the resource's gate. Run logs the three
// findings (the lock, the writes, the coverage); a lock that broke mutual
// exclusion or its lease contract, or a stale write through the gate,
// fails the test with the first counterexample and the path of the run's
// history, which `lab check PATH` judges again.
func ExampleRun() {
	testMyLock := func(t *testing.T) {
		res := labtest.Run(t, "overlap", newMemLock(), labtest.Duration(10*time.Second))
		t.Logf("%s: lock %s, writes %s (%d stale, %d refused by the gate), %d takeovers",
			res.Mode, res.Findings.Lock.Verdict, res.Findings.Writes.Verdict, res.StaleWritesLanded, res.CommitsRefused, res.Takeovers)
	}
	_ = testMyLock
}
