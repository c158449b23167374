// Package leasetest holds conformance suites for implementations of the
// leasefence contract, in the spirit of testing/fstest and
// golang.org/x/net/nettest: one function an implementation's tests call,
// which runs every property the contract promises as a subtest.
//
//   - TestService checks a leasefence.Service: fence ordering, no
//     resurrection, the reasons of every refusal, idempotent retries, at
//     most one live holder under concurrent acquirers, a release or renewal
//     with a stale token never touching a newer holder (even the same
//     holder's newer lease), a granted TTL that never outlasts the lease,
//     Hold and TryHold leaving nothing held after an error on it (a failed
//     gate, a grant they cannot use, a lost reply) even once their ctx has
//     ended, and, for a service that implements it,
//     leasefence.HolderReader.
//   - TestGate checks a leasefence.Gate, given the two things it needs
//     beyond the interface to see a write land (GateHarness): the admission
//     rule, the refusal log, fences that keep all 64 bits, the contexts
//     every method must honour, and writes that land in fence order under
//     racing committers.
//
// The suites need nothing but the implementation under test; they work for
// an in-memory coordinator on a manual clock and for one on a real store in
// real time alike (see Harness). In real time a machine can stall past a
// lease's end between a grant and the check that it is held: TestService
// counts on a lease only up to its holder's deadline (the request's send
// plus the TTL granted, on the suite's clock, as a holder dates it), skips
// a check answered after it, and calls two grants of a resource two live
// holders only when each came before the other's deadline.
//
// A suite is only as good as the broken implementations it catches. The
// package's own tests keep a set of them (a release keyed by holder name,
// fences kept in 32 bits, a gate that checks then sets, a TTL counted from
// the reply, a renewal that resurrects an expired lease, a fresh grant for
// a retried request, a takeover of a live lease, a refusal answered but
// not logged, readers blind to their ctx, a lock-delay ignored, a
// lock-delay after a release too) and require each to fail the subtest
// written for it.
package leasetest
