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
//     as a restart without AOF does.
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
//     UTF-8), checked before anything is sent, as at every gate.
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
