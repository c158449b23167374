package sqlgate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leasefence/lab/leasefence"
)

// checkLeaseTable makes sure WithCurrentLease's table can be read, with
// the columns the check reads: the gate creates nothing in it.
func (g *Gate) checkLeaseTable(ctx context.Context) error {
	if g.leaseTab == "" {
		return nil
	}
	err := g.retry(ctx, "reading the lease table", func() error {
		rows, err := g.db.QueryContext(ctx, `SELECT resource, holder, fence, expires_us, released FROM `+g.leaseTab+` WHERE 1 = 0`)
		if err != nil {
			return err
		}
		return rows.Close()
	})
	if err != nil {
		return fmt.Errorf("%w: the lease table %s of WithCurrentLease cannot be read (sqllease.CreateSchema makes it): %w", ErrSchema, g.leaseTab, err)
	}
	return nil
}

// leaseLive reports, in tx, whether t is the resource's current, live
// lease in the lease table (SQLite; PostgreSQL reads it with the floor).
func (g *Gate) leaseLive(ctx context.Context, tx *sql.Tx, t leasefence.Token) (bool, error) {
	var one int
	err := tx.QueryRowContext(ctx, g.q.leaseLive, g.resource, t.Holder, int64(t.Fence)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// refuseLease logs the refusal of t, whose lease is not live, in tx, in
// which nothing of t's was raised or written, commits it, and returns the
// refusal; tx is ended either way. A lease that has ended never lives
// again, so the judgement needs no second look.
func (g *Gate) refuseLease(ctx context.Context, tx *sql.Tx, t leasefence.Token) error {
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	r, err := g.logRefusal(ctx, tx, t, false)
	if err == nil {
		err = tx.Commit()
	}
	switch {
	case errors.Is(err, ErrNoFloor):
		return err
	case err != nil:
		return g.leaseNotLogged(r, err)
	}
	return &LeaseNotLiveError{Rejection: r, Table: g.leaseTab}
}

// leaseNotLogged is a lease refusal whose log entry could not be written:
// it matches ErrLeaseNotLive and leasefence.ErrRefusalNotLogged.
func (g *Gate) leaseNotLogged(r leasefence.Rejection, err error) error {
	r.Seq = 0
	return &leasefence.RefusalNotLoggedError{Rejection: r, Err: fmt.Errorf("%w in %s: %w", ErrLeaseNotLive, g.leaseTab, err)}
}
