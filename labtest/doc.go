// Package labtest puts a lock implementation under the lab from a test:
// the same agents, the same faults (stalls past the TTL, delayed, lost and
// duplicated messages) and the same checker as `lab run`, in real time,
// with the user's Lock in place of the lab's coordinator.
//
//	func TestMyLock(t *testing.T) {
//		labtest.Check(t, mylock.New(client))
//	}
//
// Check puts the lock through the default battery (below), a scenario
// after another, in under a minute; Run puts it under one scenario:
//
//	labtest.Run(t, "overlap", mylock.New(client), labtest.Duration(10*time.Second))
//
// # The battery
//
// Check's battery (spec.Battery, the one list `lab run battery` runs too)
// is scenarios chosen so that together they exercise every path a lock
// has. None scripts an action per known bug: each draws its faults from
// its seed, as a swarm does, and each is there for a class of bug:
//   - contention: six holders on one resource, one stall in five past the
//     TTL. Contended grants and takeovers: a lock that grants a resource
//     while it is held, or whose Deadline lies past the server's expiry.
//   - paused-holder: two holders on each resource, half the writes
//     stalled past the TTL. The paused holder renews its lease after it
//     ended: a Renew that takes back a key it lost, or answers nil.
//   - slow-replies: leases held over several TTLs by renewals whose
//     replies come back up to 300ms late: a Deadline counted from a late
//     reply, past the server's expiry.
//   - lost-replies: four holders on four resources, mostly free, 1 reply
//     in 4 and 1 request in 10 lost, acquires retried: a lock that grants twice when an acquire is retried after
//     its reply was lost (a re-entrant grant to the same holder).
//   - duplicates: 2 requests in 5 delivered twice, up to 100ms late, to
//     short leases each released, two holders on each resource: a Release that frees the key whoever
//     holds it (an unconditional DEL) or by its holder's name, or answers
//     nil for a lease no longer live.
//   - restart: the coordinator restarts without its fence counter. The
//     lab cannot restart a user's lock's server, so Check leaves it out,
//     with a note; Run refuses a scenario with restarts up front (a
//     restart-* built-in), naming it, and never charges it to the lock.
//
// Over the battery a correct lock on the in-memory store is exercised at
// least as much as BatteryFloor says (takeovers, renewals after expiry,
// late releases, lost replies retried, ...), several times that in a
// run. Lost and duplicated messages are real time's: a lost request or
// reply is dropped at the lab's boundary (the lab does not call the lock,
// or does not give its answer back to the holder), not on the wire
// between your client and its server; a lock is judged on what its calls
// returned.
//
// Check logs a line per scenario (its findings and coverage counts: with
// go test -v, as it goes), then the findings summed over the battery. It
// fails as Run does on a scenario that broke the lock, naming the
// scenario, the property and the history file, and stops there: a run
// ends at the first counterexample of the lock's own safety (the lab
// judges its events as they happen), and the battery runs no further
// scenario. KeepGoing runs everything to its end. A finding is judged
// inconclusive only if no scenario of the battery put it to the test: a
// lock whose leases never end fails Check with "the lock finding is
// inconclusive: no lease ended without a release, so no takeover tested
// exclusion", unless AllowInconclusive.
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
// violation); a call that returns more than realtime.CallSlack after its
// context's deadline (the lab gives every call one) is the library's
// error, a broken lock finding, and one that never returns fails the run
// (below).
// Renew or Release of a lease the record shows had ended answered with an
// error that does not match ErrNotHeld breaks the lock finding too (the
// history records which errors matched). testdata/after-end.yaml of this package
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
// # In virtual time
//
// CheckVirtual puts a lock built on a go-redis client through the same
// battery inside a testing/synctest bubble, on an in-memory Redis
// (miniredis) whose TTLs follow the bubble's clock: the same runner,
// faults and checker, a battery's half minute of faults in a fraction of
// a second. Seeds runs it over many seeds of drawn fault mixes.
//
// # Dependencies
//
// labtest is the lab's root module (github.com/leasefence/lab): a module
// that requires it for its tests adds the lab and its own dependencies to
// its go.sum (etcd's client, go-redis, miniredis, SQLite's pure-Go
// driver, the OpenTelemetry API, among others), but links them only into
// its test binaries. docs/contenders.md gives the block of go.mod lines
// that makes labtest importable before the lab is released.
package labtest
