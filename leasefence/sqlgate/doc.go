// Package sqlgate is a fence gate inside a SQL database: the database itself
// refuses a write whose fence is below the highest fence it has admitted for
// the resource, in the same transaction as the write, and keeps the floor and
// the refusal log in tables beside the data they guard.
//
// It works on database/sql with any driver for SQLite or PostgreSQL and
// imports no driver itself.
//
// *Gate implements leasefence.Gate (Resource, Admit, Floor, RejectionsSince,
// RejectionCount), the methods every gate shares, so code that reads floors
// and refusal logs treats it like any other gate. Commit is not part of that
// interface: it keeps the write shape natural to a database, a func that
// runs statements on the *sql.Tx that judged the token.
// New(ctx, db, resource, ...Option) takes, like every durable gate's
// constructor, the store's handle, the resource and options, and returns an
// error; unlike those of etcdlease and redislease, which send nothing, it
// takes a ctx, because it reads, and may create, its tables.
//
//	gate, err := sqlgate.New(ctx, db, "orders")
//	err = gate.Commit(ctx, lease.Token, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES ($1, $2)`, id, total)
//		return err
//	})
//	if errors.Is(err, leasefence.ErrStaleFence) { /* a newer holder has written: stop */ }
//
// The token comes from any session: sqllease.Lock (a lease in the same
// database), etcdlease.Lock or redislease.Lock in one call, or
// leasefence.Hold (session.Token()). Example_holdAndAStalledWorker
// is the whole program a worker runs, on SQLite, with a stall that makes
// its write late and the database refusing it; Example_guardingADatabaseRow
// shows the floor and the refusal log surviving a restart. They use
// modernc.org/sqlite, which only this package's tests require: the package
// imports no driver, and an importer builds none.
//
// # What it guarantees
//
//   - The floor check, the floor raise and the write run in one transaction,
//     and the database decides. On SQLite, Commit's first statement is a
//     conditional UPDATE of the resource's floor row that matches only if the
//     floor admits the token; it takes the database's write lock before
//     anything is read (a transaction that reads first would be answered
//     SQLITE_BUSY in WAL mode however long the busy timeout). On PostgreSQL
//     the first statement is SELECT ... FOR UPDATE of the floor row, which
//     waits for any transaction holding the row and reads the committed
//     floor; the row stays locked until the transaction ends, and it is
//     rewritten, by the same conditional UPDATE, only when the floor rises
//     (rewriting it on every commit would grow a chain of dead row versions
//     under a holder that commits again and again). A token above the
//     floor the Gate last saw (a new lease's first write) is sent the
//     conditional UPDATE first, which checks, raises and locks in one
//     statement. The floor a Gate saw only picks the statement: nothing in
//     process memory decides, so gates in many processes, or many *sql.DB
//     handles, on one database serialise correctly.
//   - If write returns an error or panics, the transaction rolls back: neither
//     the write nor the floor change is applied. (The in-memory
//     leasefence.FenceGate keeps its floor raised, since it cannot undo a
//     partial write; a database can.)
//   - A refusal is a *leasefence.StaleFenceError, or an error matching
//     leasefence.ErrTokenConflict for the floor's own fence under another
//     holder, returned only once it is durably logged: the refusal is judged
//     and appended to the log in a transaction of its own, in which write
//     never ran, and with the floor row locked, so the log names the floor
//     that refused it and its sequence numbers are 1, 2, 3, ... per resource.
//     A refusal whose log cannot be written (the insert or its COMMIT fails,
//     ctx ends) is a *leasefence.RefusalNotLoggedError instead
//     (leasefence.ErrRefusalNotLogged): the write did not land, and the
//     caller is told the log does not hold it. It names the floor that
//     refused the write once the gate has read it; a failure before the
//     gate read any floor (a session cut between the refused raise and the
//     log) leaves FloorHolder "" and FloorFence 0, which no refusal names
//     otherwise.
//   - Holder and resource ids follow the core's rule (leasefence.MaxIDLen,
//     1 KiB, valid UTF-8, no control characters), checked before anything
//     is sent: the resource is in the primary key of both tables, whose
//     B-tree entries PostgreSQL bounds at 2,704 bytes, and PostgreSQL's
//     TEXT refuses invalid UTF-8 where SQLite stores it. The same id gets
//     the same answer on every gate.
//   - Reopening the database gives back the floor, with its holder, and the
//     whole log. Each log entry carries the database's clock at the refusal.
//   - With WithCurrentLease(table), when the leases are sqllease's in the
//     same database, the write's transaction also checks that the token is
//     the resource's current, live lease (its row in table has the token's
//     holder and fence, is not released, and expires after the database's
//     clock now; on PostgreSQL it is read in the statement that locks or
//     raises the floor row, once that row is held, and held FOR SHARE
//     until the write commits, so no acquire replaces the lease under
//     it). A token the floor admits but whose lease has ended is refused
//     with a *LeaseNotLiveError (ErrLeaseNotLive), logged like a floor
//     refusal in a transaction in which write never ran, the floor it
//     names at or below the token's fence. So a holder
//     whose lease ended is refused even before any newer holder has
//     written. The table is read by the layout sqllease's package doc
//     fixes; this package imports nothing of sqllease.
//   - Busy and serialisation failures (SQLite's SQLITE_BUSY and SQLITE_LOCKED,
//     PostgreSQL's serialization_failure and deadlock_detected) roll the
//     attempt back and retry it a bounded number of times with jittered
//     exponential backoff (WithRetry); then the error matches ErrBusy and
//     wraps the last failure. A Commit that returns an error other than a
//     refusal was not refused: it may have been judged and rolled back, or
//     never judged.
//
// # Tables
//
// New creates two tables if they are absent, named with a prefix
// (WithTablePrefix, "leasefence_" by default) and shared by every resource:
//
//	CREATE TABLE leasefence_floor (
//		resource TEXT PRIMARY KEY,
//		holder   TEXT NOT NULL,   -- '' for a floor nobody has written under
//		fence    BIGINT NOT NULL, -- 0 before the first write
//		refused  BIGINT NOT NULL  -- refusals logged so far: the last Seq
//	);
//	CREATE TABLE leasefence_rejections (
//		resource     TEXT NOT NULL,
//		seq          BIGINT NOT NULL,
//		holder       TEXT NOT NULL, -- the refused writer
//		fence        BIGINT NOT NULL,
//		floor_holder TEXT NOT NULL, -- who raised the floor that refused it
//		floor_fence  BIGINT NOT NULL,
//		at_us        BIGINT NOT NULL, -- the database's clock, µs since the Unix epoch
//		PRIMARY KEY (resource, seq)
//	);
//
// A role that may not create tables can use tables created ahead with these
// statements; it needs SELECT, INSERT and UPDATE on both. A table of that
// name with other columns is reported as a collision (ErrSchema), never
// written to.
//
// # Dialects
//
// The dialect is inferred from the package path of the driver's type
// (db.Driver()): a path containing "sqlite" is SQLite (modernc.org/sqlite,
// github.com/mattn/go-sqlite3, ...); one containing "pgx", "lib/pq" or
// "postgres" is PostgreSQL. Anything else is ErrUnknownDialect unless
// WithDialect names it. Busy failures are recognised by the driver error's
// Code() int (modernc.org/sqlite), its SQLState() string (pgx, lib/pq), or,
// for SQLite drivers without either, the message "database is locked".
//
// On SQLite, use WAL mode and a busy timeout
// ("?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)" with
// modernc.org/sqlite): without a busy timeout every concurrent writer is
// answered SQLITE_BUSY at once and leans on the gate's bounded retry.
//
// # Limits
//
//   - write may run more than once: a busy or serialisation failure anywhere
//     in the attempt, write's own statements included, rolls the attempt back
//     and runs it again. write must do nothing but statements on tx.
//   - Fences are stored in signed 64-bit columns: a token whose fence is
//     above math.MaxInt64 is ErrFenceRange.
//   - A COMMIT whose answer is lost (the connection dies after sending it) is
//     reported as an error although the transaction may have committed, as
//     for any database transaction.
//   - A Commit or Admit of the same resource from inside write, with write's
//     context (or one derived from it), would wait on the floor row its own
//     transaction holds: it is refused with ErrNestedCommit, whichever Gate
//     and *sql.DB it goes through, since a second handle on the same
//     database waits on the same row (on PostgreSQL for ever: its deadlock
//     detector cannot see a wait that goes through the client). The mark is
//     the resource and the table prefix, not the handle, so the same
//     resource name on another database is refused too. Commits to other
//     resources of the same SQLite database from inside write wait on the
//     write lock and end in ErrBusy; on PostgreSQL they work.
//   - The gate trusts its tables: a floor lowered by hand is obeyed.
//   - Fencing catches a stale write only after a newer holder has written or
//     been admitted (Admit), as with the in-memory gate, unless the gate is
//     made WithCurrentLease. Admit checks the floor only.
package sqlgate
