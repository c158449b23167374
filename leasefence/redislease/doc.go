// Package redislease puts the leasefence coordinator and a fence gate on
// Redis, where most services already keep their locks. It gives a team on
// Redis the whole of leasefence: holders anchor their deadlines at the
// instant they sent the request (leasefence.Client, leasefence.Hold), every
// grant carries a fence, and a Gate next to the data refuses a stale
// holder's write in the same MULTI/EXEC that would apply it. Redis is not a
// consensus system: the limits below say plainly what it cannot promise.
//
// It needs Redis 7.0 or later, and a client (redis.UniversalClient) allowed
// to run EVAL, EVALSHA, WATCH, MULTI and EXEC.
//
// # Taking a lock
//
// Lock is the one call: it makes a Coordinator and a Client with defaults
// (DefaultLockTTL, leasefence.DefaultHolder, leasefence.DefaultLockSkew) and holds the lease in the background until Release; a
// write goes through a Gate with the session's token, in the MULTI/EXEC
// that checks the fence:
//
//	session, err := redislease.Lock(ctx, rdb, "deploy-slot", redislease.LockOptions{})
//	if err != nil { ... }
//	defer session.Release(context.Background())
//	gate, err := redislease.NewGate(rdb, "deploy-slot", redislease.GateOptions{})
//	err = gate.Commit(ctx, session.Token(), func(ctx context.Context, pipe redis.Pipeliner) error {
//		return pipe.Set(ctx, "{leasefence:}app:version", "v42", 0).Err()
//	})
//	if errors.Is(err, leasefence.ErrStaleFence) { /* a newer holder has written: stop */ }
//
// ExampleLock is that program; Example takes the same steps with the
// explicit pieces (New, leasefence.NewClient, leasefence.Hold), for a
// coordinator shared by many sessions or a Client of your own;
// ExampleReplication keeps fences across a Sentinel failover. They need a
// Redis server and so are not run as examples: TestLock and the failover
// tests run the same steps on the servers of scripts/redis.sh and of
// package redisdeploy.
//
// # Keys
//
// Every key of one prefix (Options.Prefix, GateOptions.Prefix; default
// DefaultPrefix) begins with the prefix in braces, "{leasefence:}", a Redis
// Cluster hash tag: all of them live in one hash slot, so the scripts and
// transactions below work on a cluster. A prefix may not contain braces.
//
//	{p}fence              the fence counter
//	{p}holder:<resource>  the live lease: "<fence>:<holder>", with the lease's TTL (PX)
//	{p}last:<resource>    the latest grant on the resource (hash), kept after it ends
//	{p}delay:<resource>   with Options.LockDelay: outlives the holder key by the delay
//	{p}req:<request id>   an acquire's record (hash), for retries; lives Options.ReplayWindow
//	{p}gate:<resource>:floor  a gate's floor (hash: fence, holder)
//	{p}gate:<resource>:log    a gate's refusal log (a stream, entry ids <seq>-0)
//
// # Coordinator
//
// Coordinator implements leasefence.Service with the in-memory
// coordinator's semantics. Acquire, Renew and Release are each one Lua
// script, so each decision is one atomic step in Redis, whichever
// coordinator process (any number may share a prefix) sends it:
//
//   - Acquire increments the fence counter in the same script that creates
//     the holder key (SET NX PX) and records the request id, so fences
//     strictly increase across all resources of a prefix. A retried request
//     id is answered from its record with the grant already made (same
//     fence, same TTL) while that lease is live, "stale-request" once it is
//     not, "request-conflict" for another holder or resource.
//   - Renew and Release compare the holder key's fence and holder with the
//     token's, never the key name alone, so a stale token can never extend
//     or delete a newer holder's lease. An expired key is gone: a lease is
//     never resurrected.
//   - TTLs are whole milliseconds. Redis dates the key's expiry from when it
//     runs the script, which is after the holder sent its request, so the
//     holder's send-anchored deadline always comes first. Coordinators on one
//     prefix may use different TTLs: each grant carries its own.
//   - "held" answers carry the key's remaining TTL as RetryAfter (at least
//     1ms). The latest grant per resource ({p}last:) is how renew and release
//     tell "released", "expired", "superseded" and "unknown" apart after the
//     holder key is gone; a token below the resource's latest fence that was
//     never issued for it is "superseded", as in memory.
//   - Options.LockDelay: the script that sets the holder key's TTL (the
//     grant, every renewal) sets {p}delay:<resource> to the TTL plus the
//     delay, and Release deletes both. Acquire refuses "lock-delay" while
//     the delay key outlives the holder key, with its PTTL as RetryAfter.
//     Why a second key rather than the holder key kept for TTL+delay:
//     Redis expires both at their PX to the millisecond, in the one atomic
//     script that set them, so the delay runs exactly from the lease's
//     expiry with no moment where a lease is live but its delay unset,
//     and the holder key keeps meaning "live" to every script (renew,
//     release, the gate's readers) unchanged. A release is a DEL of the
//     delay key in the same script, so a release is never delayed, and an
//     expired holder's release, refused as "expired", leaves the delay
//     key alone. The delay is in Redis, so a coordinator started after
//     the expiry (or one without a LockDelay of its own) refuses too; the
//     delay of the coordinator that last granted or renewed the lease is
//     the one that runs. Redis's limits apply to it: a restart without
//     persistence, or a failover to a replica that missed the write, loses
//     the delay key with the lease.
//
// # Gate
//
// Gate is a fence gate whose floor and refusal log are Redis keys beside
// the data they guard. Commit first WATCHes the floor and reads it, then
// sends MULTI, the raise of the floor, the caller's queued commands and
// EXEC: EXEC applies them only if nobody moved the floor since the read that
// judged the token, so the check and the write are one operation. A refusal
// is appended to the log by a script that judges again in the same step,
// and returned (a *leasefence.StaleFenceError or
// *leasefence.TokenConflictError) only once it is logged.
//
// Why WATCH rather than one script: the caller's commands are typed go-redis
// commands (a redis.Pipeliner), whose replies go back into the caller's
// *redis.StringCmd and friends, and which on Redis Cluster must be routed
// by their keys; a script would have to re-encode them and declare every
// key. WATCH keeps them what they are. Commit costs two round trips (WATCH
// and the read pipelined, then MULTI/EXEC); three on a cluster client, which
// must WATCH before it can pick the node.
//
// # Replicas, Sentinel and failover
//
// Teams run Redis as a primary, replicas that copy it asynchronously, and
// Sentinels that promote a replica when the primary stops answering; an
// application reaches the primary through the Sentinels
// (redis.NewFailoverClient, a *redis.Client that New, NewGate and Lock take
// like any other; scripts/redis-sentinel.sh and package redisdeploy start
// such a deployment on loopback). A failover can promote a replica that
// missed the last writes: the grants, fences and floors in them are gone,
// though Redis answered them. Two options trade latency for what can be
// saved, and name what cannot:
//
//   - Replication (Options, GateOptions, LockOptions): WAIT for Replicas
//     replicas, up to Timeout, after every fence minted (a retried request
//     id waits again) and every Commit or Admit that applied. Too few in
//     time is a *ReplicationError matching ErrNotReplicated: the write is
//     applied on the primary, Acked replicas had it, and a failover may
//     lose it. Acquire then returns no grant (resend the request id to
//     wait again); Commit's commands and floor raise stand. A failover
//     keeps an acknowledged write only if it promotes a replica that
//     acknowledged it: waiting for every replica makes that so.
//   - Watermark (one per process, given to its Coordinators and Gates):
//     the highest fence and each floor this process has seen, kept out of
//     Redis. An Acquire on a counter found below it mints above it (the
//     fence is not reissued); a Gate that finds its floor below the floor
//     it saw puts it back before judging, so a stale holder is refused
//     (*leasefence.StaleFenceError, logged) and a fence issued again to
//     another holder meets a *leasefence.TokenConflictError. Each finding
//     is a Rewind (matching ErrRewound) in Watermark.Rewinds. What another
//     process saw and this one did not, it cannot catch.
//
// What survives which fault, measured by this package's tests on a
// primary, two replicas and three Sentinels on loopback (failover_test.go,
// watermark_test.go, restart_test.go), with the counts of one run of
// LEASEFENCE_FAILOVER_TRIES=10; "stale route" is a client that still
// reaches the old primary after it resumes (pinned to its address, or a
// pooled connection not yet moved), which Redis lets take writes until
// the Sentinels demote it:
//
//	fault                    default                    Replication              Watermark
//	restart, AOF always      everything kept            not run (*)              not run (*)
//	restart, no AOF          counter, floors lost:      no help: WAIT covers     counter passed, floors put
//	                         fences reissued, a stale   replicas, not the        back: stale holder refused,
//	                         holder admitted            disk (*)                 reissue a token conflict
//	failover of a paused     18 of 50023 answered       WAIT 2: 0 of 816         not run
//	primary, writes racing   grants lost, in 6 of 10    answered grants lost
//	it through the Sentinels failovers; each lost one   in 10 failovers
//	                         answered by the old
//	                         primary after it resumed
//	failover, stale route    grant lost, its fence      WAIT 1: every grant      with WAIT 1: the next grant
//	                         reissued, two holders:     there ErrNotReplicated:  passes the rewound counter,
//	                         10 of 10 failovers         10 of 10                 ErrRewound: 10 of 10;
//	                                                                             a fence reissued: 0 of 10
//
// (*) reasoned, not measured: the options add no write of their own that
// a restart could lose, and WAIT says nothing of the disk. The restarts
// are one deterministic run each. With WAIT 2, far fewer grants were
// answered in the racing test: while the old primary was away the new one
// had one replica, and every grant then was ErrNotReplicated, which is
// WAIT's price in availability. The tests demote the old primary as soon
// as it resumes; the Sentinels wait some seconds before they do, so in a
// deployment the window for losses after a resume is longer than the one
// measured.
//
// A primary cut off from its replicas while clients still reach it (a
// network partition, redisdeploy.Partition) is measured by the lab's
// failover fixtures (docs/real-systems.md in the repository, 10 runs each):
// on the defaults, fences were reissued in every run, and a gate outside
// Redis refused them (no stale write landed); with WAIT for both replicas
// and a Watermark, no fence was reissued in any run. Not measured: Sentinels
// that lose their own majority.
//
// The cost, BenchmarkOptions (p50 latency through the failover client, a
// loaded 2-core machine, 6 runs of 2000, benchstat): acquire and release
// 709µs by default, 679µs with a Watermark (no difference benchstat
// finds), 1214µs with WAIT 1 (+71%), 1123µs with WAIT 2 (+58%), 1220µs
// with both (+72%); a Commit raising the floor 350µs, 313µs (none),
// 561µs (+60%), 592µs (+69%), 594µs (+70%). A Watermark costs nothing
// measurable; WAIT costs the replicas' round trip, each write fsynced on
// them as on the primary.
//
// # Limits (say them to whoever relies on this)
//
//   - The fence counter survives a restart of Redis only if every write is
//     on disk before Redis replies: AOF with appendfsync always
//     (scripts/redis.sh runs that way). With appendfsync everysec, an RDB
//     snapshot, or no persistence, a restart loses the last writes (or all
//     of them), and the counter starts again below fences already issued:
//     fences are reissued.
//   - Replication is asynchronous: a failover to a replica that missed the
//     last writes loses grants (a second holder may be granted a resource
//     whose lease the first still believes it holds) and reissues fences,
//     as a restart without AOF does. Replication and Watermark narrow
//     this and name what is left (above); nothing in Redis closes it.
//   - After fences are reissued, a gate whose floor lives elsewhere (in SQL,
//     in another Redis, in memory) refuses the new holders, since their
//     fences are at or below its floor: safe, but unavailable until an
//     operator sets Options.MinFence at or above the highest floor, so that
//     every fence issued is above it. A gate whose floor lives in the same
//     Redis rewinds with the counter, so a stale holder whose fence is above
//     the rewound floor can be admitted after the newer holder wrote: the
//     analogue of an etcd snapshot restored without --bump-revision.
//   - Redis does not roll back a transaction whose queued command fails at
//     run time (a WRONGTYPE, say): the floor stays raised and the other
//     commands apply. Commit then returns an error matching
//     ErrCommandFailed that names the command. This is weaker than the etcd
//     and SQL gates, which apply all or nothing.
//   - A script that runs longer than Redis's busy-reply-threshold makes
//     Redis answer BUSY to everything meanwhile, MULTI included: as for any
//     Redis transaction, commands pipelined behind a refused MULTI may then
//     run on their own. Keep long scripts off a Redis that gates writes.
//   - Fences stay below 2^53 (MaxFence), the integers Lua's numbers hold
//     exactly; Acquire fails with leasefence.ErrFencesExhausted beyond.
//   - Holder ids, resource names and request ids follow the core's id rule
//     (leasefence.ValidateID: at most leasefence.MaxIDLen bytes of valid
//     UTF-8 without control characters), checked before anything is sent,
//     as at every gate.
//   - Clock skew between holders and Redis is still an assumption
//     (leasefence.ClientOptions.ClockSkew), and Redis's own clock decides
//     expiry: a Redis host whose clock jumps expires keys early or late.
package redislease

import "errors"

// Errors of this package. Refusals and malformed calls use the leasefence
// sentinels (ErrStaleFence, ErrTokenConflict, ErrWrongResource,
// ErrInvalidRequest, ErrFencesExhausted).
var (
	// ErrReservedKey: a Commit command that names a key under the prefix
	// (which only the coordinator and the gates write), or a command that
	// could reach any key (a script, FLUSHDB, a nested MULTI).
	ErrReservedKey = errors.New("redislease: command touches a leasefence key")
	// ErrCommandFailed: a Commit whose transaction ran, with the floor
	// raised, but one of whose queued commands failed; Redis applied the
	// others.
	ErrCommandFailed = errors.New("redislease: a queued command failed; the others and the floor's raise were applied")
	// ErrCorruptKey: a leasefence key whose value cannot be read.
	ErrCorruptKey = errors.New("redislease: unreadable leasefence key")
)
