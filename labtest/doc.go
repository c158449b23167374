// Package labtest puts a lock implementation under the lab from a test:
// the same agents, the same faults (stalls past the TTL, delayed, lost and
// duplicated messages) and the same checker as `lab run`, in real time,
// with the user's Lock in place of the lab's coordinator.
//
//	func TestMyLock(t *testing.T) {
//		labtest.Run(t, "overlap", mylock.New(client), labtest.Duration(10*time.Second))
//	}
//
// # Three findings
//
// Run logs the run's verdict in three findings (Result.Findings, computed
// by the lab's checker, which `lab check FILE` of the kept history gives
// again):
//   - lock: the lock's own safety, mutual exclusion (it granted a resource
//     while an earlier lease on it had neither been released nor expired
//     by its own Deadline) and the lease contract (below). Broken fails
//     the test. Inconclusive when no lease ended without a release, so no
//     takeover tested exclusion: that fails the test too, unless
//     AllowInconclusive.
//   - writes: stale writes (a write that landed after a newer lease
//     generation's write had landed) under the discipline. Fenced, any
//     fails the test. Naive, they are the expected finding, not the lock's
//     fault: logged with the remedy and counted in Result, failing the
//     test only under RequireNoStaleWrites. Inconclusive (failing unless
//     AllowInconclusive) when no two holders acted on a resource at once.
//   - coverage: what the run exercised, with its counts; what it did not
//     is listed, and never said to have held.
//
// A failure names the finding, its first counterexample and the history
// file the run wrote, which `lab check FILE` judges again.
//
// # The lease contract
//
// Renew and Release of a lease that is no longer live (it expired, was
// released, or another holder was granted the resource) return an error
// matching ErrNotHeld with errors.Is (a lock may wrap its own error with
// it). A Lease's Deadline never lies past what the server granted.
// Acquire, Renew and Release honour their context. Run checks what the
// record shows of each: a Renew answered nil though sent after its lease
// had ended, or a Release answered nil for a lease no longer live, is a
// broken lock finding; a Deadline past the server's expiry shows as a
// grant while the earlier lease still ran (a mutual-exclusion
// violation); a call that ignores its context fails the run (below).
// Whether an error matches ErrNotHeld the record does not show: any error
// is taken for the lock lost. testdata/after-end.yaml of this package
// renews and releases a lease after another holder took the resource
// over: a scenario file that puts the first rule to the test.
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
