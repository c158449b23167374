package pgbackend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// Store keeps the resources of each mode in the backend's PostgreSQL, in
// the run's schema: each behind a sqlgate Gate on the mode's tables, its
// record a writes table, a row per write inserted in the gate's
// transaction (fenced) or on its own (naive), ordered by a sequence the
// database draws as it applies them.
//
// With Lease (Settings.Gate GateLease) the gates check, in the write's
// transaction, that its token is the current, live lease in the mode's
// lease table too (sqlgate.WithCurrentLease); Commit reports such a
// refusal as a *realtime.LeaseRefusedError, which the history records
// as a refusal for the lease, and the checker holds to the lease's end.
type Store struct {
	P     *Postgres
	Lease bool
}

// Name implements realtime.Store.
func (Store) Name() string { return registry.Postgres }

// Close implements realtime.Store; the backend owns the schema.
func (Store) Close() error { return nil }

// FloorsLostWithBackend implements realtime.FloorKeeper: a restart ends
// connections, and PostgreSQL keeps the floors.
func (Store) FloorsLostWithBackend() bool { return false }

// Resource implements realtime.Store.
func (s Store) Resource(ctx context.Context, mode history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
	p := s.P
	writes := p.table("writes", mode)
	if _, err := p.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+writes+` (
		seq BIGSERIAL PRIMARY KEY, resource TEXT NOT NULL, holder TEXT NOT NULL,
		fence BIGINT NOT NULL, write_id BIGINT NOT NULL, at_ns BIGINT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("realtime: postgres store: %w", err)
	}
	opts := []sqlgate.Option{sqlgate.WithDialect(sqlgate.Postgres), sqlgate.WithTablePrefix(p.table("gate", mode) + "_")}
	if s.Lease {
		// The gate reads the lease table, which the mode's coordinator
		// makes; the run's process opens the resources before any
		// coordinator when its agents are processes.
		leases := p.table("leases", mode)
		if err := sqllease.CreateSchema(ctx, p.db, sqllease.Options{Table: leases, Dialect: sqllease.Postgres}); err != nil {
			return nil, fmt.Errorf("realtime: postgres store: %w", err)
		}
		opts = append(opts, sqlgate.WithCurrentLease(leases))
	}
	g, err := sqlgate.New(ctx, p.db, name, opts...)
	if err != nil {
		return nil, fmt.Errorf("realtime: postgres store: %w", err)
	}
	return &resource{db: p.db, gate: g, name: name, now: now,
		insert:   `INSERT INTO ` + writes + ` (resource, holder, fence, write_id, at_ns) VALUES ($1, $2, $3, $4, $5)`,
		landings: `SELECT write_id, at_ns FROM ` + writes + ` WHERE resource = $1 ORDER BY seq`}, nil
}

type resource struct {
	db               *sql.DB
	gate             *sqlgate.Gate
	name             string
	now              func() time.Duration
	insert, landings string
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// write inserts write id's row, stamped as it is sent: the sequence, not
// the stamp, orders the record.
func (r *resource) write(ctx context.Context, e execer, t leasefence.Token, id uint64) error {
	_, err := e.ExecContext(ctx, r.insert, r.name, t.Holder, int64(t.Fence), int64(id), int64(r.now()))
	return err
}

// Commit inserts the write's row in the gate's transaction: admitted, it
// is in the record; refused, it never was. A refusal for the lease is a
// *realtime.LeaseRefusedError.
func (r *resource) Commit(ctx context.Context, t leasefence.Token, id uint64) error {
	err := r.gate.Commit(ctx, t, func(ctx context.Context, tx *sql.Tx) error { return r.write(ctx, tx, t, id) })
	return leaseRefusal(err)
}

// leaseRefusal is err, a gate's answer, as a *realtime.LeaseRefusedError
// if it refused the token's lease: logged, or not.
func leaseRefusal(err error) error {
	var logged *sqlgate.LeaseNotLiveError
	var unlogged *leasefence.RefusalNotLoggedError
	switch {
	case !errors.Is(err, sqlgate.ErrLeaseNotLive):
		return err
	case errors.As(err, &logged):
		return &realtime.LeaseRefusedError{Floor: leasefence.Token{Holder: logged.FloorHolder, Fence: logged.FloorFence}, Err: err}
	case errors.As(err, &unlogged):
		return &realtime.LeaseRefusedError{Floor: leasefence.Token{Holder: unlogged.FloorHolder, Fence: unlogged.FloorFence}, NotLogged: true, Err: err}
	}
	return err
}

func (r *resource) Write(ctx context.Context, t leasefence.Token, id uint64) error {
	return r.write(ctx, r.db, t, id)
}

func (r *resource) Landings(ctx context.Context) ([]realtime.Landing, error) {
	return realtime.QueryLandings(ctx, r.db, r.landings, r.name)
}

func (r *resource) Admit(ctx context.Context, t leasefence.Token) error { return r.gate.Admit(ctx, t) }

func (r *resource) Floor(ctx context.Context) (leasefence.Token, error) { return r.gate.Floor(ctx) }
