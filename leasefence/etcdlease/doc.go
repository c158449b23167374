// Package etcdlease puts the leasefence coordinator and a fence gate on
// etcd, the replicated store people already run: leases and fences survive
// restarts of any process and of the whole cluster, any number of
// coordinator processes can share them, and the network between holders and
// the coordinator is etcd's.
//
// It is built on its own transactions, not on etcd's concurrency.Mutex,
// whose Unlock deletes by key name (a retried Unlock can delete a newer
// holder's key) and whose session dates the lease from the reply. Holders
// still use leasefence.Client, which anchors every deadline at the instant
// the request was sent, and leasefence.Hold for a session that renews in the
// background and says when the lease is lost.
//
// # Taking a lock
//
// Lock is the one call: it makes a Coordinator and a Client with defaults
// and holds the lease in the background; a write goes through a Gate with
// the session's token, in the same etcd transaction that checks the fence:
//
//	session, err := etcdlease.Lock(ctx, cli, "deploy-slot", etcdlease.LockOptions{})
//	if err != nil { ... }
//	defer session.Release(context.Background())
//	gate, err := etcdlease.NewGate(cli, "deploy-slot", etcdlease.GateOptions{})
//	err = gate.Commit(ctx, session.Token(), clientv3.OpPut("/app/version", "v42"))
//	if errors.Is(err, leasefence.ErrStaleFence) { /* a newer holder has written: stop */ }
//
// The runnable examples are in leasefence/tests/etcdlease, run by go test
// there: Example_lock (example_lock_test.go, the README's quick start)
// runs two holders on an embedded etcd and shows the late write refused;
// Example_hold takes the same steps with the explicit pieces (New,
// leasefence.NewClient, leasefence.Hold), for a coordinator shared by many
// sessions or a Client of your own. Both start etcd from the etcdembed
// module (leasefence/etcdlease/etcdembed), and that test module already
// requires etcd's server: this module requires etcd's client only, so an
// importer's module graph lists no etcd server, bbolt or raft
// (scripts/importcost.sh checks).
//
// # etcd's client logs
//
// etcdlease logs nothing and leaves the client's logger alone: the client
// is yours. etcd's client, at its default logger, writes a JSON warning,
// "retrying of unary invoker failed ... context canceled", for every call
// whose context ends before its answer. After a process wakes from a pause
// (SIGSTOP, a long GC pause) it is the renewal its session gave up on at
// the lease's deadline: the lease was lost, as Session.Lost says, and etcd
// did not fail. A clientv3.Config Logger at error level (as Example_hold's)
// keeps etcd's errors without these warnings.
//
// # Coordinator
//
// Coordinator implements leasefence.Service with the in-memory
// coordinator's semantics:
//
//   - The fence is the etcd revision that created the holder's key,
//     <prefix>holders/<resource>. Revisions strictly increase across all
//     keys and across restarts of the whole cluster, so fences strictly
//     increase across resources and restarts; no StartFence is needed. They
//     are not consecutive: every write to the cluster takes a revision.
//   - Each grant is one etcd lease, and the holder key is attached to it:
//     when the lease expires, etcd deletes the key, and the resource is
//     free. An acquire readies a lease and runs one transaction that
//     creates the key only if the resource is free and the request id
//     unused, or else reads why not in the same revision. The lease is one
//     of the coordinator's spares, granted ahead in the background and
//     restarted at its full TTL by a keep-alive (no Raft write) when the
//     acquire arrives, or else a lease granted then: one Raft write on a
//     grant's path with a spare, two without. A lease a refusal did not use
//     has nothing attached and becomes a spare (or is revoked); a spare
//     never used expires with nothing attached.
//   - Renew is one keep-alive of that grant's etcd lease, with a read that
//     checks the holder key's create revision is the token's fence. One
//     etcd lease belongs to one grant, so a stale token can never extend a
//     newer holder's lease. An expired etcd lease cannot be kept alive: it
//     is never resurrected. A coordinator remembers the etcd lease of each
//     grant it made or renewed, and within a TTL of that sends the grant's
//     keep-alive and read together (one round trip); for any other grant
//     it reads the key for its lease first (three).
//   - Release deletes the holder key in a transaction that compares its
//     create revision with the token's fence (never the key name alone), and
//     records the release. The grant's etcd lease, with nothing attached,
//     is left to expire by itself: one Raft write.
//   - A retried request id is answered with the grant already made while
//     that lease is live, "stale-request" once it is not, and
//     "request-conflict" for another holder or resource. The record of the
//     id is an etcd key (<prefix>requests/<id>) created in the granting
//     transaction, so a retry sent to another coordinator process, or after
//     this one restarted, gets the same answer. Records live between one and
//     two Options.ReplayWindow.
//   - The latest grant on each resource is kept in <prefix>last/<resource>
//     (a key without a lease, one per resource), which is how renew and
//     release tell "released", "expired", "superseded" and "unknown" apart
//     after the holder key is gone.
//   - With Options.LockDelay, a grant also writes <prefix>armed/<resource>
//     and a release deletes it: a holder key gone while it remains is an
//     expiry. The first acquire to find one replaces it, in one
//     transaction, with <prefix>delay/<resource> on an etcd lease of the
//     delay, and every acquire answers "lock-delay" while that key lives.
//     The delay so runs from the first acquire after the expiry, never
//     less than LockDelay after it; lockdelay.go says why not from the
//     expiry itself.
//
// Where etcd cannot tell two reasons apart, this is what is answered:
//
//   - A lease past its expiry whose revocation etcd has not yet applied
//     (the leader checks about every half second) still has its holder key.
//     Acquire answers "held" (RetryAfter one second) and a release of it
//     succeeds, where the in-memory coordinator would answer "expired"; a
//     renewal of it is "expired", since etcd refuses the keep-alive. A retry
//     of the request that granted it is answered with the grant (the
//     holder's deadline, dated from the first send, has passed by then)
//     rather than "stale-request".
//   - RetryAfter comes from etcd's remaining TTL, which is whole seconds,
//     truncated: it is rounded up, so always > 0 while held, and at most the
//     granted TTL.
//   - A token whose fence was never issued for its resource, below the
//     resource's latest fence, is "superseded" (as in memory).
//
// # Gate
//
// Gate is a fence gate whose floor and refusal log are etcd keys under
// <prefix>gates/<resource>/. It implements leasefence.Gate (Resource, Admit,
// Floor, RejectionsSince, RejectionCount), the methods every gate shares.
// Commit is not part of that interface: it keeps the write shape natural to
// etcd, operations (clientv3.Op) applied in the same transaction that checks
// the floor and raises it, so the write lands if and only if the fence is
// not below the floor, in every process that writes through a Gate on that
// resource. A refusal is a *leasefence.StaleFenceError, appended to the
// durable log with both holders, both fences and a sequence number, and
// returned only once it is there: a refusal the gate could not log (etcd
// failed, or ctx ended between the floor's read and the log's write) is a
// *leasefence.RefusalNotLoggedError. Refused before anything is sent:
// operations that touch any key under the prefix (ErrReservedKey), more
// than MaxCommitOps of them (ErrTooManyOps), and holder or resource ids that
// break the core's rule (a *leasefence.IDError: at most
// leasefence.MaxIDLen bytes of valid UTF-8 without control characters; etcd
// keys hold any bytes, but every gate answers an id alike, and a bounded id
// keeps the log's transaction far below etcd's request limit).
//
// NewGate(cli, resource, GateOptions) has the shape of the Redis gate's
// constructor: the store's handle, the resource, the options, and an
// error. It takes no ctx because it sends nothing; sqlgate.New creates its
// tables, so it takes one.
//
// The coordinator applies the same id rule to holders, resources and
// request ids. What it runs in the background (grants of spare leases)
// ends with Close or with the client.
//
// # Known limits
//
//   - etcd restarts every lease at its full TTL when a new leader is
//     elected. That makes RetryAfter a hint, and a resource stays held up to
//     one TTL longer than its holder believes. It does not make leases only
//     longer: a replaced leader, resumed, can answer a keep-alive from its
//     own lessor while the new leader expires the lease on its own
//     schedule. A keep-alive counts only when a linearizable read after it
//     reports no higher Raft term (ErrStaleKeepAlive otherwise); a follower
//     that forwards a keep-alive to a replaced leader and learns the new
//     term before answering can still slip through.
//   - Restoring a snapshot without --bump-revision rewinds revisions, and so
//     fences: fences issued after the snapshot are issued again, and gates
//     refuse the new holders' writes (or, for a gate restored from the same
//     snapshot, admit a stale holder). Always restore with --bump-revision
//     (and --mark-compacted).
//   - TTLs are whole seconds, and etcd raises any TTL below its minimum
//     (1.5 election timeouts) to that minimum; Grant.TTL says what was
//     granted.
//   - Clock skew between holders and etcd is still an assumption
//     (leasefence.ClientOptions.ClockSkew), and fencing still needs the
//     resource to check: the Gate does that for data kept in the same etcd.
//   - A Commit cannot return what its operations read; write only.
package etcdlease

import "errors"

// Errors of this package. Refusals and malformed calls use the leasefence
// sentinels (ErrStaleFence, ErrTokenConflict, ErrWrongResource,
// ErrInvalidRequest).
var (
	// ErrReservedKey: a Commit operation that reads or writes a key under the
	// leasefence prefix, which only the coordinator and the gates write.
	ErrReservedKey = errors.New("etcdlease: operation touches a leasefence key")
	// ErrCorruptKey: a leasefence key whose value cannot be read.
	ErrCorruptKey = errors.New("etcdlease: unreadable leasefence key")
	// ErrTooManyOps: a Commit with more than MaxCommitOps operations,
	// refused before anything is sent.
	ErrTooManyOps = errors.New("etcdlease: too many operations for one Commit")
	// ErrStaleKeepAlive: a keep-alive answered at a lower Raft term than a
	// linearizable read after it, so possibly by a replaced leader: whether
	// the lease was restarted is unknown, as when no answer came. A renewal
	// or acquire that returns it may be retried.
	ErrStaleKeepAlive = errors.New("etcdlease: keep-alive not confirmed at the current Raft term")
)
