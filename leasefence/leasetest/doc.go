// Package leasetest holds conformance suites for implementations of the
// leasefence contract, in the spirit of testing/fstest and
// golang.org/x/net/nettest: one function an implementation's tests call,
// which runs every property the contract promises as a subtest.
//
//   - TestService checks a leasefence.Service: fence ordering, no
//     resurrection, the reasons of every refusal, idempotent retries, at
//     most one live holder under concurrent acquirers, and a release or
//     renewal with a stale token never touching a newer holder.
//   - TestGate checks a fence gate.
//
// The suites need nothing but the implementation under test; they work for
// an in-memory coordinator on a manual clock and for one on a real store in
// real time alike (see Harness).
package leasetest
