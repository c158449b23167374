package sqlgate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Sentinel errors. Calls with a nil context, a nil *sql.DB, a nil write, a
// token with fence 0, or an option out of range answer
// leasefence.ErrInvalidRequest; a resource or holder that breaks the core's
// id rule (leasefence.MaxIDLen: valid UTF-8, no control characters) answers
// a *leasefence.IDError, which matches it too; a token for another resource
// answers leasefence.ErrWrongResource, as at the in-memory gate. All of
// these are refused before anything is sent.
var (
	// ErrBusy: the database stayed busy, or kept aborting the transaction to
	// serialise it, for every attempt WithRetry allows. The error wraps the
	// last failure. Nothing was admitted, and nothing was refused unless
	// the error matches leasefence.ErrRefusalNotLogged too (the last attempt
	// judged the token stale but could not log it); the commit may be tried
	// again.
	ErrBusy = errors.New("sqlgate: database busy, gave up retrying")
	// ErrSchema: the gate's tables are missing and cannot be created (no
	// permission, a read-only database), or a table of that name has other
	// columns.
	ErrSchema = errors.New("sqlgate: the gate's tables are unusable")
	// ErrNoFloor: the resource's floor row is gone (deleted by hand). The gate
	// will not guess a floor: New with the same resource recreates it at
	// fence 0, or WithInitialFloor.
	ErrNoFloor = errors.New("sqlgate: the resource has no floor row")
	// ErrFenceRange: a fence above math.MaxInt64, which the gate's BIGINT
	// columns cannot hold.
	ErrFenceRange = errors.New("sqlgate: fence above the largest signed 64-bit integer")
	// ErrUnknownDialect: the driver's dialect could not be inferred; name it
	// with WithDialect.
	ErrUnknownDialect = errors.New("sqlgate: unknown SQL dialect")
	// ErrNestedCommit: a Commit or Admit of a resource, made with the
	// context of a running write on the same resource and tables (through
	// any Gate, on any *sql.DB), which would wait forever on the floor row
	// its caller's transaction holds.
	ErrNestedCommit = errors.New("sqlgate: Commit or Admit from inside a write on the same resource")
	// ErrLeaseNotLive: a gate made WithCurrentLease refused a token the
	// floor admits, because it is not the resource's current, live lease.
	// The refusal is logged (a *LeaseNotLiveError), or the error matches
	// leasefence.ErrRefusalNotLogged too.
	ErrLeaseNotLive = errors.New("sqlgate: the token is not the resource's current, live lease")
)

// LeaseNotLiveError is the refusal of a token whose lease has ended, by a
// gate made WithCurrentLease. The Rejection is the log entry: the floor it
// names admitted the token (its fence is at or below the token's), which
// tells it apart from a stale-fence refusal in the log.
type LeaseNotLiveError struct {
	leasefence.Rejection
	Table string // the lease table consulted
}

func (e *LeaseNotLiveError) Error() string {
	return fmt.Sprintf("sqlgate: lease not live at %q: %s@%d is not the current, live lease in %s (refusal #%d)",
		e.Resource, e.Holder, e.Fence, e.Table, e.Seq)
}

// Is reports whether target is ErrLeaseNotLive.
func (e *LeaseNotLiveError) Is(target error) bool { return target == ErrLeaseNotLive }

// Gate is a fence gate whose floor and refusal log live in a SQL database.
// Its methods are safe for concurrent use, and any number of Gates, in any
// number of processes, may guard the same resource of one database: they
// serialise through the database.
type Gate struct {
	db       *sql.DB
	resource string
	dialect  Dialect
	attempts int
	backoff  time.Duration
	floorTab string
	logTab   string
	leaseTab string // WithCurrentLease's table, or ""
	q        statements
	// seen is the floor's fence as this gate last read or raised it: on
	// PostgreSQL, a hint of which statement to send first (judge), never
	// a judgement.
	seen atomic.Uint64
}

var _ leasefence.Gate = (*Gate)(nil)

// statements is the SQL a Gate runs, in its dialect and on its tables.
type statements struct {
	// raise sets the floor to ($2, $3) if the floor admits that token: a
	// higher fence, or the same fence from its holder or from anyone while
	// it has none. One row affected means admitted.
	raise string
	// raiseLease is raise that also returns whether ($2, $3) is the
	// resource's current, live lease in the lease table, holding the lease
	// row FOR SHARE (PostgreSQL, a gate made WithCurrentLease). RETURNING
	// is computed once the floor row is locked and written, so the lease
	// is judged after any wait for the floor row, on its newest version,
	// as in lockLease.
	raiseLease string
	// lock reads the floor and locks its row until the transaction ends
	// (PostgreSQL only).
	lock string
	// lockLease is lock that also reports whether ($2, $3) is the
	// resource's current, live lease in the lease table, holding the
	// lease row FOR SHARE until the transaction ends (PostgreSQL, a gate
	// made WithCurrentLease).
	//
	// The lease row is read by a sub-select of the floor row the CTE has
	// locked, so PostgreSQL reads it, and the clock, once the floor row's
	// wait is over: a sub-select beside the lock would be run before the
	// wait. It is selected by resource alone and judged in its select list,
	// so that a lease row changed since the statement began (renewed,
	// released, granted anew) is locked at its newest version and judged
	// on it (under READ COMMITTED PostgreSQL evaluates a locked row again
	// when it has changed); conditions in its WHERE would judge the version
	// the statement's snapshot saw and skip it if that one had expired.
	lockLease string
	// count takes the next sequence number for a refusal and returns the
	// floor that refused it. It locks the floor row, so refusals of one
	// resource are numbered one at a time, each against the floor then.
	count      string
	logRefusal string
	floor      string
	refused    string
	log        string
	ensureRow  string
	initFloor  string
	// leaseLive selects a row if ($2, $3) is the current, live lease of
	// resource $1 in the lease table (SQLite, whose write lock, taken by
	// the raise before it, holds off any acquire until the transaction
	// ends).
	leaseLive string
}

func newStatements(d Dialect, floorTab, logTab, leaseTab string) statements {
	s := statements{
		raise: `UPDATE ` + floorTab + ` SET holder = $2, fence = $3 WHERE resource = $1 AND ` +
			`(fence < $3 OR (fence = $3 AND (holder = '' OR holder = $2)))`,
		lock:  `SELECT holder, fence FROM ` + floorTab + ` WHERE resource = $1 FOR UPDATE`,
		count: `UPDATE ` + floorTab + ` SET refused = refused + 1 WHERE resource = $1 RETURNING holder, fence, refused`,
		logRefusal: `INSERT INTO ` + logTab + ` (resource, seq, holder, fence, floor_holder, floor_fence, at_us) ` +
			`VALUES ($1, $2, $3, $4, $5, $6, ` + d.nowMicros() + `)`,
		floor:   `SELECT holder, fence FROM ` + floorTab + ` WHERE resource = $1`,
		refused: `SELECT refused FROM ` + floorTab + ` WHERE resource = $1`,
		log: `SELECT seq, holder, fence, floor_holder, floor_fence, at_us FROM ` + logTab +
			` WHERE resource = $1 AND seq > $2 ORDER BY seq`,
		ensureRow: `INSERT INTO ` + floorTab + ` (resource, holder, fence, refused) VALUES ($1, '', $2, 0) ON CONFLICT (resource) DO NOTHING`,
		initFloor: `UPDATE ` + floorTab + ` SET holder = '', fence = $2 WHERE resource = $1 AND fence < $2`,
		leaseLive: `SELECT 1 FROM ` + leaseTab + ` WHERE resource = $1 AND holder = $2 AND fence = $3 AND released = 0 AND expires_us > ` + d.nowMicros(),
		raiseLease: `UPDATE ` + floorTab + ` SET holder = $2, fence = $3 WHERE resource = $1 AND ` +
			`(fence < $3 OR (fence = $3 AND (holder = '' OR holder = $2))) ` +
			`RETURNING COALESCE((SELECT l.holder = $2 AND l.fence = $3 AND l.released = 0 AND l.expires_us > ` + d.nowMicros() +
			` FROM ` + leaseTab + ` l WHERE l.resource = ` + floorTab + `.resource FOR SHARE), FALSE)`,
		lockLease: `WITH f AS MATERIALIZED (SELECT resource, holder, fence FROM ` + floorTab + ` WHERE resource = $1 FOR UPDATE) ` +
			`SELECT f.holder, f.fence, COALESCE((SELECT l.holder = $2 AND l.fence = $3 AND l.released = 0 AND l.expires_us > ` + d.nowMicros() +
			` FROM ` + leaseTab + ` l WHERE l.resource = f.resource FOR SHARE), FALSE) FROM f`,
	}
	for _, q := range []*string{&s.raise, &s.raiseLease, &s.lock, &s.lockLease, &s.count, &s.logRefusal, &s.floor, &s.refused, &s.log, &s.ensureRow, &s.initFloor, &s.leaseLive} {
		*q = d.placeholders(*q)
	}
	return s
}

// New returns the gate of resource in db. It creates the gate's tables if
// they are absent, and the resource's floor row (at fence 0, or at
// WithInitialFloor) if it has none: a resource's floor and log outlive
// every Gate and process that used them.
func New(ctx context.Context, db *sql.DB, resource string, opts ...Option) (*Gate, error) {
	switch {
	case ctx == nil:
		return nil, fmt.Errorf("%w: sqlgate.New with a nil context", leasefence.ErrInvalidRequest)
	case db == nil:
		return nil, fmt.Errorf("%w: sqlgate.New with a nil *sql.DB", leasefence.ErrInvalidRequest)
	}
	if err := leasefence.ValidateID(leasefence.IDResource, resource); err != nil {
		return nil, err
	}
	c := newConfig(opts)
	if c.err != nil {
		return nil, c.err
	}
	if c.dialect == 0 {
		d, err := inferDialect(db)
		if err != nil {
			return nil, err
		}
		c.dialect = d
	}
	g := &Gate{
		db: db, resource: resource, dialect: c.dialect,
		attempts: c.attempts, backoff: c.backoff,
		floorTab: c.prefix + "floor", logTab: c.prefix + "rejections", leaseTab: c.leaseTable,
	}
	g.q = newStatements(g.dialect, g.floorTab, g.logTab, g.leaseTab)
	if err := g.ensureTables(ctx); err != nil {
		return nil, err
	}
	if err := g.checkLeaseTable(ctx); err != nil {
		return nil, err
	}
	if err := g.retry(ctx, "creating the floor row", func() error { return g.ensureFloorRow(ctx, c.initialFloor) }); err != nil {
		return nil, err
	}
	return g, nil
}

// Resource returns the resource the gate guards.
func (g *Gate) Resource() string { return g.resource }

// Dialect returns the dialect the gate speaks.
func (g *Gate) Dialect() Dialect { return g.dialect }

// ensureFloorRow creates the resource's floor row if it has none and raises
// it to the initial floor. It reads first so that a gate on tables it may
// only read (a read-only replica, a read-only SQLite file) still opens.
func (g *Gate) ensureFloorRow(ctx context.Context, initial leasefence.Fence) error {
	floor, err := g.readFloor(ctx, g.db)
	switch {
	case errors.Is(err, ErrNoFloor):
		if _, err := g.db.ExecContext(ctx, g.q.ensureRow, g.resource, int64(initial)); err != nil {
			return fmt.Errorf("sqlgate: creating the floor row of %q in %s: %w", g.resource, g.floorTab, err)
		}
		return nil
	case err != nil:
		return err
	case floor.Fence < initial:
		if _, err := g.db.ExecContext(ctx, g.q.initFloor, g.resource, int64(initial)); err != nil {
			return fmt.Errorf("sqlgate: raising the floor of %q to the initial floor %d: %w", g.resource, initial, err)
		}
	}
	return nil
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readFloor reads the floor row as it is: holder "" and fence 0 before the
// first write.
func (g *Gate) readFloor(ctx context.Context, q querier) (leasefence.Token, error) {
	return g.readFloorWith(ctx, q, g.q.floor)
}

// readFloorWith reads the floor row with query, which selects its holder
// and fence.
func (g *Gate) readFloorWith(ctx context.Context, q querier, query string) (leasefence.Token, error) {
	return g.scanFloor(q.QueryRowContext(ctx, query, g.resource))
}

// scanFloor reads the floor from row, whose first columns are the floor
// row's holder and fence, and the columns after them into more.
func (g *Gate) scanFloor(row *sql.Row, more ...any) (leasefence.Token, error) {
	var holder string
	var fence int64
	err := row.Scan(append([]any{&holder, &fence}, more...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return leasefence.Token{}, fmt.Errorf("%w: %q in %s", ErrNoFloor, g.resource, g.floorTab)
	}
	if err != nil {
		return leasefence.Token{}, fmt.Errorf("sqlgate: reading the floor of %q: %w", g.resource, err)
	}
	return leasefence.Token{Resource: g.resource, Holder: holder, Fence: leasefence.Fence(fence)}, nil
}

// checkToken refuses, before anything is sent, what no coordinator issued to
// this resource.
func (g *Gate) checkToken(ctx context.Context, op string, t leasefence.Token) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: sqlgate.%s with a nil context", leasefence.ErrInvalidRequest, op)
	case t.Resource != g.resource:
		return fmt.Errorf("%w: token %v at the gate of %q", leasefence.ErrWrongResource, t, g.resource)
	case t.Fence > math.MaxInt64:
		return fmt.Errorf("%w: token %v", ErrFenceRange, t)
	}
	return leasefence.ValidateToken(t)
}

// Commit runs write in the transaction that admits t, if the database's
// floor for the resource admits t: t's fence is above the floor, or is the
// floor's own fence from the floor's holder (from anyone while the floor has
// no holder). The floor is raised to t in that transaction, before write
// runs; if write returns an error or panics, everything rolls back, floor
// included, and Commit returns write's error as is (a panic propagates after
// the rollback).
//
// A token below the floor is refused with a *leasefence.StaleFenceError; the
// floor's fence under another holder is refused with an error matching
// leasefence.ErrTokenConflict. Either is returned only after it has been
// appended to the resource's log, in a transaction of its own in which write
// did not run. A refusal that could not be logged (the insert or its COMMIT
// failed, or ctx ended) is a *leasefence.RefusalNotLoggedError, matching
// leasefence.ErrRefusalNotLogged: the write did not land. Any other error
// means Commit was not refused: see the package doc for retries (write may
// run more than once) and ErrBusy.
//
// write receives a context derived from ctx and a transaction bound to it;
// cancelling ctx rolls the transaction back and Commit returns an error
// matching ctx.Err().
func (g *Gate) Commit(ctx context.Context, t leasefence.Token, write func(ctx context.Context, tx *sql.Tx) error) error {
	if err := g.checkToken(ctx, "Commit", t); err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("%w: sqlgate.Commit with a nil write", leasefence.ErrInvalidRequest)
	}
	if err := g.checkNested(ctx, "Commit", t); err != nil {
		return err
	}
	return g.retry(ctx, "commit", func() error { return g.commitOnce(ctx, t, write) })
}

// commitOnce is one attempt at a Commit, in one transaction.
func (g *Gate) commitOnce(ctx context.Context, t leasefence.Token, write func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback() // a panic in write, or any error below: undo the floor with the write
		}
	}()
	v, floor, err := g.judge(ctx, tx, t, true)
	if err != nil {
		return err
	}
	switch v {
	case refused:
		r, err := g.logRefusal(ctx, tx, t, true)
		if err == nil {
			done = true
			err = tx.Commit()
		}
		switch {
		case errors.Is(err, errRejudge), errors.Is(err, ErrNoFloor):
			return err // not a refusal after all
		case err != nil:
			if r.Seq == 0 {
				// The log failed before it read the floor: the floor that
				// refused t is the one judge read under the row's lock, if
				// it read one, else unknown (zero).
				r.FloorHolder, r.FloorFence = floor.Holder, floor.Fence
			}
			r.Seq = 0
			return &leasefence.RefusalNotLoggedError{Rejection: r, Err: err}
		}
		return leasefence.RejectionError(r)
	case notLive, notLiveRaised:
		done = true // refuseLease ends the transaction it is given
		if v == notLiveRaised {
			// The floor was raised before the lease was read: undo the
			// raise, and log in a transaction of its own.
			_ = tx.Rollback()
			if tx, err = g.db.BeginTx(ctx, nil); err != nil {
				return g.leaseNotLogged(leasefence.Rejection{Resource: g.resource, Holder: t.Holder, Fence: t.Fence}, err)
			}
		}
		return g.refuseLease(ctx, tx, t)
	}
	mark := &writeMark{}
	mark.running.Store(true)
	defer mark.running.Store(false)
	if err := write(g.marked(ctx, mark), tx); err != nil {
		return err
	}
	done = true
	return tx.Commit()
}

// verdict is judge's decision on a token.
type verdict int

const (
	refused       verdict = iota // the floor refuses the token
	admitted                     // the floor admits it, raised to it if need be, and its lease is live if checked
	notLive                      // the floor admits it, but it is not the current, live lease (WithCurrentLease)
	notLiveRaised                // notLive, judged after raising the floor to it: the raise must be rolled back
)

// judge decides, in tx, whether the floor admits t and, with lease on a
// gate made WithCurrentLease, whether t is the resource's current, live
// lease; if both, it raises the floor to t. The floor row stays locked
// until tx ends whatever the verdict, so the decision holds until then. It
// returns the floor it read under the row's lock (PostgreSQL, a token at
// or below the floor this Gate last saw), or the zero Token where the
// conditional UPDATE judged alone, reading no floor.
//
// On SQLite the first statement must write: it takes the database's write
// lock, whereas a read first would open a read transaction whose later write
// SQLite answers SQLITE_BUSY at once in WAL mode. So the conditional UPDATE
// comes first, and SQLite rewrites the row in place even when the token is
// already the floor: an UPDATE that spared the rewrite would need a second
// statement to tell the floor's own token from a refusal, and preparing
// that statement measured dearer than the rewrite. The lease is read after
// it, under the write lock.
//
// On PostgreSQL every UPDATE writes a new version of the row, even one that
// changes nothing, and a row updated thousands of times a second grows a
// chain of dead versions that each later update walks: a holder committing
// again and again under its lease would slow down with every commit. So the
// row is locked with SELECT ... FOR UPDATE, which waits for any transaction
// holding it and then reads the committed floor (and the lease, in the same
// statement), and rewritten only when the floor rises, once per new lease.
// The rule applied is the raise statement's (admits), and the raise is
// still the conditional UPDATE, so a rule that disagreed would be caught as
// errRejudge, never admitted. A token above the floor this gate last saw
// goes the other way round (raiseFirst): the conditional UPDATE alone
// checks, raises and locks, one statement instead of two for the first
// write of a lease, and a rewrite of the row at most once per floor a gate
// had not seen.
func (g *Gate) judge(ctx context.Context, tx *sql.Tx, t leasefence.Token, lease bool) (verdict, leasefence.Token, error) {
	lease = lease && g.leaseTab != ""
	if g.dialect == Postgres {
		if uint64(t.Fence) > g.seen.Load() {
			v, err := g.raiseFirst(ctx, tx, t, lease)
			return v, leasefence.Token{}, err
		}
		floor, live, err := g.lockFloor(ctx, tx, t, lease)
		if err != nil {
			return refused, leasefence.Token{}, err
		}
		g.seen.Store(uint64(floor.Fence))
		r := leasefence.Rejection{Holder: t.Holder, Fence: t.Fence, FloorHolder: floor.Holder, FloorFence: floor.Fence}
		switch {
		case !admits(r):
			return refused, floor, nil
		case !live:
			return notLive, floor, nil
		case floor.Holder == t.Holder && floor.Fence == t.Fence:
			return admitted, floor, nil // t is the floor already: the lock is all it takes
		}
	}
	v, err := g.raise(ctx, tx, t, lease)
	return v, leasefence.Token{}, err
}

// raise is judge's conditional UPDATE, after the locked floor admitted t
// on PostgreSQL, and first on SQLite.
func (g *Gate) raise(ctx context.Context, tx *sql.Tx, t leasefence.Token, lease bool) (verdict, error) {
	res, err := tx.ExecContext(ctx, g.q.raise, g.resource, t.Holder, int64(t.Fence))
	if err != nil {
		return refused, err
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return refused, err
	case n == 0 && g.dialect == Postgres:
		return refused, errRejudge // the locked floor admitted t, so the raise must have matched
	case n == 0:
		return refused, nil
	case lease && g.dialect != Postgres:
		live, err := g.leaseLive(ctx, tx, t)
		if err != nil || !live {
			return notLiveRaised, err
		}
	}
	g.seen.Store(uint64(t.Fence))
	return admitted, nil
}

// raiseFirst judges t by the conditional UPDATE alone (PostgreSQL), which
// checks, raises and locks in one statement where the lock and then the
// raise take two. judge sends it for a token above the floor this gate
// last saw, most likely a new lease's first write; below that, the lock
// comes first, since an UPDATE writes a new row version even when it
// changes nothing. No row updated means the floor refuses t (the refusal's
// log locks the row and looks again). With lease, the same statement
// judges the lease once the floor row is raised.
func (g *Gate) raiseFirst(ctx context.Context, tx *sql.Tx, t leasefence.Token, lease bool) (verdict, error) {
	live := true
	var err error
	if lease {
		err = tx.QueryRowContext(ctx, g.q.raiseLease, g.resource, t.Holder, int64(t.Fence)).Scan(&live)
	} else {
		var res sql.Result
		if res, err = tx.ExecContext(ctx, g.q.raise, g.resource, t.Holder, int64(t.Fence)); err == nil {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n == 0 {
				err = sql.ErrNoRows
			}
		}
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return refused, nil
	case err != nil:
		return refused, err
	case !live:
		return notLiveRaised, nil
	}
	g.seen.Store(uint64(t.Fence))
	return admitted, nil
}

// lockFloor locks the floor row and reads the floor (PostgreSQL); with
// lease, the same statement reports whether t is the resource's current,
// live lease and holds its lease row FOR SHARE. Without lease, live is
// true.
func (g *Gate) lockFloor(ctx context.Context, tx *sql.Tx, t leasefence.Token, lease bool) (floor leasefence.Token, live bool, err error) {
	if !lease {
		floor, err := g.readFloorWith(ctx, tx, g.q.lock)
		return floor, true, err
	}
	floor, err = g.scanFloor(tx.QueryRowContext(ctx, g.q.lockLease, g.resource, t.Holder, int64(t.Fence)), &live)
	return floor, live, err
}

// logRefusal appends the refusal of t to the log, in tx, whose conditional
// raise refused t. It takes the sequence number and the floor under the
// floor row's lock; a floor that would admit t (lowered by hand since the
// raise was refused) sends the attempt round again. On an error it returns
// as much of the refusal as it learnt: the floor, once it was read.
//
// stale is false for a lease refusal, whose floor admits t by definition.
func (g *Gate) logRefusal(ctx context.Context, tx *sql.Tx, t leasefence.Token, stale bool) (leasefence.Rejection, error) {
	r := leasefence.Rejection{Resource: g.resource, Holder: t.Holder, Fence: t.Fence}
	var floorHolder string
	var floorFence, seq int64
	err := tx.QueryRowContext(ctx, g.q.count, g.resource).Scan(&floorHolder, &floorFence, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: %q in %s", ErrNoFloor, g.resource, g.floorTab)
	}
	if err != nil {
		return r, err
	}
	r.Seq, r.FloorHolder, r.FloorFence = uint64(seq), floorHolder, leasefence.Fence(floorFence)
	if stale && admits(r) {
		return r, errRejudge
	}
	if _, err := tx.ExecContext(ctx, g.q.logRefusal, g.resource, seq, t.Holder, int64(t.Fence), floorHolder, floorFence); err != nil {
		return r, err
	}
	return r, nil
}

// errRejudge sends an attempt round again: the floor moved down between
// the judgement and the log.
var errRejudge = errors.New("sqlgate: the floor moved down during a commit")

// admits reports whether the floor named in r admits r's token: the rule
// the raise statement applies, for the refusal path to check itself against.
func admits(r leasefence.Rejection) bool {
	return r.Fence > r.FloorFence || r.Fence == r.FloorFence && (r.FloorHolder == "" || r.FloorHolder == r.Holder)
}

// writeKey marks, in a write's context, the floor row (resource and
// tables) that the write's transaction holds; writeMark says whether it
// still does. The key leaves out the *sql.DB on purpose: a second handle on
// the same database (or a second Gate) waits on the same row, and no
// handle can tell whether another is on the same database. A write on one
// database that commits to the same resource and tables on another is
// refused too: a resource name is meant to name one resource.
type writeKey struct {
	floorTab string
	resource string
}

type writeMark struct{ running atomic.Bool }

// marked is ctx marked as the context of a running write of g's resource.
func (g *Gate) marked(ctx context.Context, m *writeMark) context.Context {
	return context.WithValue(ctx, writeKey{g.floorTab, g.resource}, m)
}

// checkNested refuses a Commit or Admit made with the context of a running
// write on this gate's resource and tables: it would wait on the floor row
// that write's transaction holds, and the write waits for it. PostgreSQL's
// deadlock detector cannot see that wait, which goes through the client.
func (g *Gate) checkNested(ctx context.Context, op string, t leasefence.Token) error {
	if m, ok := ctx.Value(writeKey{g.floorTab, g.resource}).(*writeMark); ok && m.running.Load() {
		return fmt.Errorf("%w: %s %v inside a write at %q", ErrNestedCommit, op, t, g.resource)
	}
	return nil
}

// Admit raises the floor to t without writing: a coordinator's push at
// reassignment. A token below the floor changes nothing, is not logged, and
// returns a *leasefence.StaleFenceError whose Seq is 0; the floor's fence
// under another holder returns an error matching leasefence.ErrTokenConflict,
// also unlogged. An Admit made with the context of a running write of this
// gate is ErrNestedCommit, as a Commit would be.
func (g *Gate) Admit(ctx context.Context, t leasefence.Token) error {
	if err := g.checkToken(ctx, "Admit", t); err != nil {
		return err
	}
	if err := g.checkNested(ctx, "Admit", t); err != nil {
		return err
	}
	return g.retry(ctx, "admit", func() error { return g.admitOnce(ctx, t) })
}

func (g *Gate) admitOnce(ctx context.Context, t leasefence.Token) error {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	v, _, err := g.judge(ctx, tx, t, false)
	if err != nil {
		return err
	}
	if v == admitted {
		return tx.Commit()
	}
	floor, err := g.readFloor(ctx, tx)
	if err != nil {
		return err
	}
	r := leasefence.Rejection{
		Resource: g.resource, Holder: t.Holder, Fence: t.Fence,
		FloorHolder: floor.Holder, FloorFence: floor.Fence,
	}
	if admits(r) {
		return errRejudge
	}
	return leasefence.RejectionError(r)
}

// Floor returns the highest token admitted: the zero Token if none, or
// Token{Resource, Fence: f} for an initial floor f nobody has written under.
// It reads the committed floor: another process may raise it at any moment.
func (g *Gate) Floor(ctx context.Context) (leasefence.Token, error) {
	if ctx == nil {
		return leasefence.Token{}, fmt.Errorf("%w: sqlgate.Floor with a nil context", leasefence.ErrInvalidRequest)
	}
	var floor leasefence.Token
	err := g.retry(ctx, "reading the floor", func() error {
		var err error
		floor, err = g.readFloor(ctx, g.db)
		return err
	})
	if err != nil {
		return leasefence.Token{}, err
	}
	if floor.Fence == 0 && floor.Holder == "" {
		return leasefence.Token{}, nil
	}
	return floor, nil
}

// retry runs attempt until it succeeds, fails for good, or has failed
// transiently (busy, serialisation, errRejudge) as many times as allowed,
// waiting a random, doubling while between attempts. A done ctx ends it at
// once with an error that matches ctx.Err().
func (g *Gate) retry(ctx context.Context, op string, attempt func() error) error {
	var last error
	for i := range g.attempts {
		if i > 0 {
			bound := min(g.backoff<<(i-1), maxBackoff)
			timer := time.NewTimer(rand.N(bound) + 1)
			select {
			case <-ctx.Done():
				timer.Stop()
				return fmt.Errorf("sqlgate: %s at %q: %w (after %w)", op, g.resource, ctx.Err(), last)
			case <-timer.C:
			}
		}
		err := attempt()
		if err == nil {
			return nil
		}
		if errors.Is(err, leasefence.ErrStaleFence) || errors.Is(err, leasefence.ErrTokenConflict) ||
			errors.Is(err, ErrLeaseNotLive) && !errors.Is(err, leasefence.ErrRefusalNotLogged) {
			return err // judged (and, for a Commit, logged): final whatever ctx says now
		}
		if cerr := ctx.Err(); cerr != nil {
			if errors.Is(err, cerr) {
				return err
			}
			// The driver may report an interrupted statement in its own
			// words: say why it was interrupted.
			return fmt.Errorf("sqlgate: %s at %q: %w (%w)", op, g.resource, cerr, err)
		}
		if err != errRejudge && !g.dialect.transient(err) {
			return err
		}
		last = err
	}
	return fmt.Errorf("%w: %s at %q, %s; last: %w", ErrBusy, op, g.resource, attemptsMade(g.attempts), last)
}

func attemptsMade(n int) string {
	if n == 1 {
		return "1 attempt (no retry)"
	}
	return fmt.Sprintf("%d attempts", n)
}
