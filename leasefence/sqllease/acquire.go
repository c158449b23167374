package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// statements is the SQL a Coordinator runs, in its dialect and on its
// tables.
type statements struct {
	version string
	// ensure makes the resource's row if it has none: a free resource
	// whose highest fence is 0. On SQLite, being a write, it takes the
	// database's write lock before anything is read.
	ensure string
	// lock reads the resource's row and, on PostgreSQL, locks it until the
	// transaction ends: the lock is what keeps two acquirers from both
	// seeing the resource free.
	lock string
	// request reads the database's clock and the answer remembered for a
	// request id, if any, in one statement: run after lock, so the clock
	// is read once the row is this transaction's.
	request string
	prune   string
	// mint takes the next fence from the counter: above the counter and
	// above the resource's own highest fence.
	mint     string
	grant    string
	remember string
	// renew and release act only on the token's current, live lease; one
	// row affected means they did.
	renew   string
	release string
	state   string
	holder  string
}

func newStatements(d Dialect, t tables) statements {
	now := d.sql().NowMicros()
	live := `resource = $1 AND holder = $2 AND fence = $3 AND released = 0 AND expires_us > ` + now
	lock := `SELECT holder, fence, expires_us, released FROM ` + t.leases + ` WHERE resource = $1`
	if d == Postgres {
		lock += ` FOR UPDATE`
	}
	s := statements{
		version: `SELECT version FROM ` + t.meta,
		ensure:  `INSERT INTO ` + t.leases + ` (resource, holder, fence, expires_us, released) VALUES ($1, '', 0, 0, 1) ON CONFLICT (resource) DO NOTHING`,
		lock:    lock,
		request: `SELECT n.now_us, r.resource, r.holder, r.fence, r.ttl_us FROM (SELECT ` + now + ` AS now_us) AS n ` +
			`LEFT JOIN ` + t.requests + ` AS r ON r.request_id = $1`,
		prune: `DELETE FROM ` + t.requests + ` WHERE resource = $1 AND at_us < $2`,
		mint: `UPDATE ` + t.meta + ` SET fence = CASE WHEN fence < $1 THEN $1 ELSE fence END + 1 ` +
			`WHERE fence < $2 RETURNING fence`,
		grant:    `UPDATE ` + t.leases + ` SET holder = $2, fence = $3, expires_us = $4, released = 0 WHERE resource = $1`,
		remember: `INSERT INTO ` + t.requests + ` (request_id, resource, holder, fence, ttl_us, at_us) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (request_id) DO NOTHING`,
		renew:    `UPDATE ` + t.leases + ` SET expires_us = ` + now + ` + $4 WHERE ` + live,
		release:  `UPDATE ` + t.leases + ` SET released = 1 WHERE ` + live,
		state:    `SELECT holder, fence, released, CASE WHEN expires_us > ` + now + ` THEN 1 ELSE 0 END FROM ` + t.leases + ` WHERE resource = $1`,
		holder:   `SELECT holder, fence FROM ` + t.leases + ` WHERE resource = $1 AND holder <> '' AND released = 0 AND expires_us > ` + now,
	}
	for _, q := range []*string{&s.ensure, &s.lock, &s.request, &s.prune, &s.mint, &s.grant, &s.remember, &s.renew, &s.release, &s.state, &s.holder} {
		*q = d.sql().Placeholders(*q)
	}
	return s
}

// row is a resource's row: its latest lease, and so its highest fence.
type row struct {
	holder    string
	fence     int64
	expiresUS int64
	released  bool
}

// live reports whether the row's lease is live at nowUS.
func (r row) live(nowUS int64) bool { return r.holder != "" && !r.released && r.expiresUS > nowUS }

// Acquire grants a lease on a free resource, or answers why not, in one
// transaction: it locks the resource's row, reads the database's clock,
// answers a request id it has seen (the grant already made while that lease
// is live), and otherwise mints a fence above every fence the table has
// issued, writes the lease and remembers the request id with its answer.
//
// The error is non-nil when no answer was had (the database unreachable,
// ctx done, busy past the retries), the tables are not there (ErrSchema),
// or the request is malformed (leasefence.ErrInvalidRequest). After an
// error the request may have been granted: resend it (same RequestID).
func (c *Coordinator) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	if err := c.ready(ctx, "acquire", leasefence.ValidateAcquire(req)); err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	var out leasefence.AcquireOutcome
	err := retry(ctx, c.dialect, "acquire "+req.Resource, func() error {
		var err error
		out, err = c.acquireOnce(ctx, req)
		return err
	})
	return out, err
}

// decision is what one acquire transaction decided, in the database's
// terms; outcome turns it into the answer.
type decision struct {
	reason    leasefence.Reason
	heldBy    string
	fence     int64
	ttl, left time.Duration
}

func (c *Coordinator) acquireOnce(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	d, err := c.decide(ctx, tx, req)
	if err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	if err := tx.Commit(); err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	return c.outcome(req, d)
}

// decide runs the acquire transaction's statements up to its commit.
func (c *Coordinator) decide(ctx context.Context, tx *sql.Tx, req leasefence.AcquireRequest) (decision, error) {
	if _, err := tx.ExecContext(ctx, c.q.ensure, req.Resource); err != nil {
		return decision{}, err
	}
	var r row
	var released int64
	if err := tx.QueryRowContext(ctx, c.q.lock, req.Resource).Scan(&r.holder, &r.fence, &r.expiresUS, &released); err != nil {
		return decision{}, err
	}
	r.released = released != 0
	var nowUS int64
	var prior remembered
	if err := tx.QueryRowContext(ctx, c.q.request, req.RequestID).Scan(&nowUS, &prior.resource, &prior.holder, &prior.fence, &prior.ttlUS); err != nil {
		return decision{}, err
	}
	if prior.resource.Valid {
		return replay(req, r, prior, nowUS), nil
	}
	if r.live(nowUS) {
		reason := leasefence.ReasonHeld
		if r.holder == req.Holder {
			reason = leasefence.ReasonAlreadyHeld
		}
		return decision{reason: reason, heldBy: r.holder, left: micros(r.expiresUS - nowUS)}, nil
	}
	if left := c.lockDelayLeft(r, nowUS); left > 0 {
		return decision{reason: leasefence.ReasonLockDelay, left: left}, nil
	}
	if _, err := tx.ExecContext(ctx, c.q.prune, req.Resource, nowUS-c.window.Microseconds()); err != nil {
		return decision{}, err
	}
	var fence int64
	err := tx.QueryRowContext(ctx, c.q.mint, r.fence, int64(math.MaxInt64)).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return decision{}, fmt.Errorf("%w: the counter in %s reached the largest signed 64-bit integer", leasefence.ErrFencesExhausted, c.tabs.meta)
	}
	if err != nil {
		return decision{}, err
	}
	ttlUS := c.ttl.Microseconds()
	if _, err := tx.ExecContext(ctx, c.q.grant, req.Resource, req.Holder, fence, nowUS+ttlUS); err != nil {
		return decision{}, err
	}
	res, err := tx.ExecContext(ctx, c.q.remember, req.RequestID, req.Resource, req.Holder, fence, ttlUS, nowUS)
	if err != nil {
		return decision{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		// Another transaction took the id meanwhile, for another resource
		// (this one's row is locked): the id is not this request's.
		return decision{reason: leasefence.ReasonRequestConflict}, err
	}
	return decision{fence: fence, ttl: c.ttl, left: c.ttl}, nil
}

// remembered is the answer the requests table holds for a request id;
// every field is NULL when it holds none.
type remembered struct {
	resource, holder sql.NullString
	fence, ttlUS     sql.NullInt64
}

// replay answers a request id the table remembers, from its answer and the
// resource's row.
func replay(req leasefence.AcquireRequest, r row, prior remembered, nowUS int64) decision {
	switch {
	case prior.resource.String != req.Resource || prior.holder.String != req.Holder:
		return decision{reason: leasefence.ReasonRequestConflict}
	case prior.fence.Int64 != r.fence || prior.holder.String != r.holder || !r.live(nowUS):
		return decision{reason: leasefence.ReasonStaleRequest}
	}
	return decision{fence: prior.fence.Int64, ttl: micros(prior.ttlUS.Int64), left: micros(r.expiresUS - nowUS)}
}

// outcome is the answer to req that d decided. A grant's expiry is stamped
// on the coordinator's own clock, for logs.
func (c *Coordinator) outcome(req leasefence.AcquireRequest, d decision) (leasefence.AcquireOutcome, error) {
	switch d.reason {
	case "":
	case leasefence.ReasonHeld, leasefence.ReasonAlreadyHeld, leasefence.ReasonLockDelay:
		return leasefence.AcquireOutcome{Reason: d.reason, HeldBy: d.heldBy, RetryAfter: max(d.left, time.Microsecond)}, nil
	default:
		return leasefence.AcquireOutcome{Reason: d.reason}, nil
	}
	now, err := c.clock.Now()
	if err != nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("sqllease: coordinator clock: %w", err)
	}
	return leasefence.AcquireOutcome{OK: true, Grant: leasefence.Grant{
		RequestID:            req.RequestID,
		Token:                leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: leasefence.Fence(d.fence)},
		TTL:                  d.ttl,
		CoordinatorExpiresAt: now.Add(max(d.left, 0)),
	}}, nil
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
