// Package sqllease is a lease coordinator whose state lives in a SQL
// database, PostgreSQL or SQLite, as etcdlease's lives in etcd: for a
// service whose only shared store is its database. *Coordinator implements
// leasefence.Service and leasefence.HolderReader; Lock takes a lease in
// one call and keeps it, as etcdlease.Lock and redislease.Lock do.
//
// It works on database/sql with any driver and imports none: the user
// brings it (pgx's stdlib or lib/pq for PostgreSQL, modernc.org/sqlite for
// SQLite). The dialect is inferred from the driver's package path, or named
// with Options.Dialect.
//
//	if err := sqllease.CreateSchema(ctx, db, sqllease.Options{}); err != nil { ... } // once, at start-up
//	session, err := sqllease.Lock(ctx, db, "deploy-slot", sqllease.LockOptions{})
//	if err != nil { ... }
//	defer session.Release(context.Background())
//
// and a write goes through sqlgate in the same database, in its own
// transaction; with sqlgate.WithCurrentLease(sqllease.DefaultTable) the gate
// also refuses a holder whose lease has ended before any newer holder has
// written.
//
// # Tables
//
// Nothing is created behind the caller's back: CreateSchema creates the
// tables (or migrates them to SchemaVersion) in one transaction, and every
// other call that finds them absent, or at another version, answers
// ErrSchema. Options.Table names them (default "leasefence_leases"), and
// may carry a schema: "locks.leases".
//
//	CREATE TABLE leasefence_leases (        -- one row per resource ever acquired
//		resource   TEXT PRIMARY KEY,
//		holder     TEXT NOT NULL,       -- the latest lease's holder ('' before the first)
//		fence      BIGINT NOT NULL,     -- the latest lease's fence: the resource's highest
//		expires_us BIGINT NOT NULL,     -- its expiry, µs since the Unix epoch on the database's clock
//		released   SMALLINT NOT NULL    -- 1 once released
//	);
//	CREATE TABLE leasefence_leases_requests ( -- acquire request ids and their answers
//		request_id TEXT PRIMARY KEY, resource TEXT NOT NULL, holder TEXT NOT NULL,
//		fence BIGINT NOT NULL, ttl_us BIGINT NOT NULL, at_us BIGINT NOT NULL
//	);
//	CREATE TABLE leasefence_leases_meta (version BIGINT NOT NULL, fence BIGINT NOT NULL);
//
// The lease table's layout is a contract other code may read: a token
// (resource, holder, fence) is its resource's current, live lease exactly
// when its row has that holder and fence, released = 0, and expires_us
// above the database's clock now. sqlgate.WithCurrentLease reads it so, in
// the write's own transaction. The layout changes only with SchemaVersion.
//
// # What it guarantees
//
//   - One live lease per resource, under PostgreSQL's default READ
//     COMMITTED: an acquire's transaction locks the resource's row (SELECT
//     ... FOR UPDATE) before it reads whether the resource is free, so two
//     acquirers take turns and the second sees the first's lease. On SQLite
//     the transaction's first statement writes, which takes the database's
//     write lock before anything is read.
//   - Fences strictly increase, across resources too: one counter per table
//     (in the _meta table), moved in the transaction that writes the grant,
//     never below the resource's own highest fence. A transaction that rolls
//     back issues nothing and moves nothing; what a committed grant wrote is
//     as durable as any commit. With synchronous_commit = on (PostgreSQL's
//     default) or local, a grant the holder heard of survives a crash and a
//     restart; off can lose the last grants, and then a fence is issued
//     twice. A failover keeps fences rising only to a replica that had the
//     commit: a synchronous standby (synchronous_standby_names, with
//     synchronous_commit = on or remote_write; remote_apply also for reads
//     of Holder on the standby). An asynchronous replica may lack the last
//     grants. SQLite: keep the default synchronous = FULL, or NORMAL in WAL
//     mode, which may lose the last commits at a power cut, not at a crash
//     of the process.
//   - The TTL runs on one clock, the database's: PostgreSQL's
//     clock_timestamp() on the server; on SQLite, which has no server, the
//     host's wall clock, read (to the millisecond) by whichever process runs
//     the statement, so all processes on one file must share a host and its
//     clock. A step of that clock moves every lease's end: forward, leases
//     end early (safe; holders are refused sooner); back, leases last
//     longer than their TTL, and a holder that dated its deadline from the
//     send may have stopped while the database still counts it as holder,
//     which delays the next holder, never doubles one. Never the holder's
//     clock: Grant.CoordinatorExpiresAt is stamped on the coordinator's own
//     (Options.Clock), for logs only, and the holder dates its deadline
//     from its send instant, as with every coordinator.
//   - A retried request id is answered with the grant already made (same
//     fence, the time it has left) while that lease is live, by any
//     coordinator on the table, through any connection: request ids, their
//     answers and the fences live in the database and outlive a release;
//     once the lease is not live the answer is "stale-request", and the id
//     from another holder or resource is "request-conflict". Ids are kept
//     for Options.ReplayWindow; older ones of a resource are deleted by its
//     next grant.
//   - Renewal is one conditional UPDATE of the token's live lease: it keeps
//     the fence and never resurrects an expired lease. Release is the same,
//     so a stale token's release does nothing. Every refusal has its reason
//     (leasefence.Reason), read from the resource's row.
//   - Busy answers (SQLite) and serialisation failures or deadlocks
//     (PostgreSQL) roll the attempt back and retry it, up to eight times
//     with jittered backoff; then ErrBusy.
//
// # Limits
//
//   - Every acquire of every resource takes the counter row's lock for the
//     end of its transaction: grants are serialised per table. Give
//     unrelated, busy sets of resources tables of their own.
//   - Fences are signed 64-bit integers in the database: the counter stops
//     at math.MaxInt64 (leasefence.ErrFencesExhausted).
//   - A COMMIT whose answer is lost may have committed: the error says no
//     answer was had, and a resent request (same id) learns the grant.
//   - The coordinator trusts its tables: a row edited by hand is obeyed.
package sqllease
