package sqllease

import (
	"context"
	"database/sql"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// DefaultLockTTL is LockOptions.TTL when 0.
const DefaultLockTTL = 10 * time.Second

// LockOptions configures Lock. Its zero value is ready to use: every field
// has a default.
type LockOptions struct {
	// TTL is the lease, default DefaultLockTTL. The session renews it in
	// the background.
	TTL time.Duration
	// Holder names the holder in grants, gate floors and refusal logs;
	// default leasefence.DefaultHolder(), unique to the call.
	Holder string
	// ClockSkew is reserved from every deadline of the holder (see
	// leasefence.ClientOptions.ClockSkew); 0 means
	// leasefence.DefaultLockSkew(TTL), a tenth of the TTL.
	ClockSkew time.Duration
	// Table is Options.Table, default DefaultTable: the tables
	// CreateSchema made.
	Table string
	// Dialect is Options.Dialect; zero infers it from the driver.
	Dialect Dialect
	// Hold configures the session: its renewal period, waits, the gates
	// that admit its token before Lock returns, its trace.
	Hold leasefence.HoldOptions
}

// Lock takes the lease on resource through the database and keeps it in
// the background: the one call for a holder that needs nothing else. It
// makes a Coordinator on db, a leasefence.Client with the defaults above,
// and calls leasefence.Hold, which waits while another holder has the
// lease (within ctx, which bounds the acquisition only). The tables must
// exist: Lock creates nothing (CreateSchema does, once, at deployment or
// start-up), and answers ErrSchema at once without them. The session's Release releases the lease; the coordinator
// runs nothing in the background, so there is nothing more to close, and
// db stays the caller's.
//
// A write under the session goes through a gate in the same database, in
// the write's own transaction:
//
//	session, err := sqllease.Lock(ctx, db, "deploy-slot", sqllease.LockOptions{})
//	if err != nil { ... }
//	defer session.Release(context.Background())
//	err = gate.Commit(ctx, session.Token(), func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `UPDATE app SET version = $1`, "v42")
//		return err
//	})
//
// The session says when the lease is lost (Lost, Err, Context); that tells
// the holder to stop starting work, and only the gate refuses a write
// already on its way (see leasefence.Hold).
//
// Errors are New's, leasefence.NewLockClient's and Hold's; after any of
// them nothing is held. Lock has no clean-up of its own: Hold's, which
// reaches the database even after ctx has ended, is all there is.
func Lock(ctx context.Context, db *sql.DB, resource string, opts LockOptions) (*leasefence.Session, error) {
	ttl := opts.TTL
	if ttl == 0 {
		ttl = DefaultLockTTL
	}
	coord, err := New(db, Options{Table: opts.Table, TTL: ttl, Dialect: opts.Dialect})
	if err != nil {
		return nil, err
	}
	client, err := leasefence.NewLockClient(opts.Holder, ttl, opts.ClockSkew)
	if err != nil {
		return nil, err
	}
	// Missing tables are not cured by waiting, and Hold would wait out
	// every error but a malformed call until ctx ends: say so now.
	if err := coord.ready(ctx, "lock", leasefence.ValidateID(leasefence.IDResource, resource)); err != nil {
		return nil, err
	}
	return leasefence.Hold(ctx, coord, client, resource, opts.Hold)
}
