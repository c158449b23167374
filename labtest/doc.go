// Package labtest puts a lock implementation under the lab from a test:
// the same agents, the same faults (stalls past the TTL, delayed, lost and
// duplicated messages) and the same checker as `lab run`, in real time,
// with the user's Lock in place of the lab's coordinator.
//
//	func TestMyLock(t *testing.T) {
//		labtest.Run(t, "overlap", mylock.New(client), labtest.Duration(10*time.Second))
//	}
//
// Run fails the test on the first counterexample: a stale write (a write
// that landed after a newer lease generation's write had landed), or a
// mutual-exclusion violation (the lock granted a resource while an earlier
// lease on it had neither been released nor expired by its own Deadline).
// The failure names the counterexample and the history file the run
// wrote, which `lab check FILE` judges again.
//
// # Disciplines
//
// A lock whose leases have a fence (Lease.Fence) runs fenced by default:
// its holders write through the resource's gate with the lock's fence,
// and the gate refuses what a stale holder sends. Any other lock runs
// naive: its holders check the lease's Deadline and write straight to
// the resource, as most code does. Naive() and Fenced() choose. A naive
// run on a scenario whose holders stall past the TTL lands stale writes
// with any lock at all: that is the finding the lab exists to show, and
// why a fence checked at the resource is the remedy.
//
// The lease's Deadline reaches the holder as the time it has left when
// Acquire (or Renew) returns; a reply delay the scenario adds on the way
// back comes on top, as it does for any lock whose holder counts its
// lease from the reply. Scenarios with reply delays therefore judge the
// naive discipline, not only the lock.
//
// # Generations
//
// The checker needs a generation for every lease. A lease with a fence is
// named by it; a lease that implements realtime.Ordered (the server's own
// order, as etcd's create revision of the lock key) by that; any other by
// the order in which its Acquire returned to the lab, and the history
// header says which (history.Contender.Generations).
//
// # Before the run
//
// Run takes the lock once on a resource of its own ("labtest-probe") to
// see whether its leases have a fence, and releases it. Before that it
// refuses a scenario that drifts the lab coordinator's clock
// (clocks.coordinator_drift_ppm), failing the test without calling the
// lock: the lock keeps its own time on its own server, and would only be
// judged on the lab's drifted clock. lab run refuses it for a library's
// contender by the same registry rule.
//
// # A lock that never returns
//
// Run returns within the run's duration and a grace (Grace, 10 seconds by
// default), whatever the lock does. A call to the lock (Acquire, Renew or
// Release) that has not returned a grace after the run's end (its context
// ended with the run) fails the test, naming the agent, the call and the
// scenario; the history kept holds everything the run recorded until
// then, each such call a library_error event, so `lab check` fails it too.
// The probe's calls are bounded the same way, a grace after the probe's
// own bound (ten TTLs, at least 10 seconds). Go cannot stop a goroutine,
// so the one in the lock's call stays blocked there, and nothing of the
// lab waits for it; nor is the lock closed, as its Close could wait for
// that call.
//
// # Dependencies
//
// labtest is the lab's root module (github.com/leasefence/lab): a module
// that requires it for its tests adds the lab and its own dependencies to
// its go.sum (etcd's client, go-redis, SQLite's pure-Go driver, the
// OpenTelemetry API, among others), but links them only into its test
// binaries.
package labtest
