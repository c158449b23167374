// Package redislocks puts the Redis lock libraries people run under the
// lab, unmodified, each on throwaway redis-servers of its own (redisdeploy's
// lone servers): redsync (go-redsync/redsync v4, one instance: TryLock,
// Until, Extend, Unlock) as the contender redsync; the same redsync over
// three independent servers, its Redlock algorithm (a lock held once a
// majority of the servers set its key), as redlock; and bsm/redislock
// (Obtain without retries, Refresh, Release) as redislock.
//
// None of the locks has a fence, so all run naive: the holder checks the
// library's own deadline (redsync's Until(); for redislock, the TTL it
// asked for, counted from the request's send) and writes straight to the
// resource. A holder paused past its TTL writes after Redis gave the key
// to another: the stale write Martin Kleppmann described in "How to do
// distributed locking" (martin.kleppmann.com, 2016-02-08), for Redlock
// with every server healthy. The lab numbers their lease generations in
// the order their grants returned to it (realtime.GenerationsObserved),
// and the history header says so.
//
// Redlock's servers are named redis-1, redis-2 and redis-3. A scenario's
// restarts (restarts: [{at, persist}]) restart redis-1 alone, on its
// append-only file or on no data, so that a majority stays healthy; a
// test pauses or restarts any of them through Redlock.
package redislocks
