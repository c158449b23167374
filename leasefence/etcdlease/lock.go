package etcdlease

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// DefaultLockTTL is LockOptions.TTL when 0.
const DefaultLockTTL = 10 * time.Second

// LockOptions configures Lock. Its zero value is ready to use: every field
// has a default.
type LockOptions struct {
	// TTL is the lease asked of etcd: whole seconds, default
	// DefaultLockTTL. The session renews it in the background.
	TTL time.Duration
	// Holder names the holder in grants, gate floors and refusal logs;
	// default leasefence.DefaultHolder(), unique to the call.
	Holder string
	// ClockSkew is reserved from every deadline of the holder (see
	// leasefence.ClientOptions.ClockSkew); 0 means
	// leasefence.DefaultLockSkew(TTL), a tenth of the TTL.
	ClockSkew time.Duration
	// Prefix is the coordinator's key prefix (Options.Prefix); default
	// DefaultPrefix, which gates of the default GateOptions share.
	Prefix string
	// Prover, if non-nil, proves every grant (Options.Prover).
	Prover leasefence.Prover
	// Hold configures the session: its renewal period, waits, the gates
	// that admit its token before Lock returns, its trace.
	Hold leasefence.HoldOptions
}

// Lock takes the lease on resource through etcd and keeps it in the
// background: the one call for a holder that needs nothing else. It makes
// a Coordinator on cli, a leasefence.Client with the defaults above, and
// calls leasefence.Hold, which waits while another holder has the lease
// (within ctx, which bounds the acquisition only). The session's Release
// releases the lease and then closes the coordinator Lock made; cli stays
// the caller's to close.
//
// A write under the session goes through a gate, with the session's token:
//
//	session, err := etcdlease.Lock(ctx, cli, "deploy-slot", etcdlease.LockOptions{})
//	if err != nil { ... }
//	defer session.Release(context.Background())
//	err = gate.Commit(ctx, session.Token(), clientv3.OpPut("/app/version", "v42"))
//
// The session says when the lease is lost (Lost, Err, Context); that tells
// the holder to stop starting work, and only the gate refuses a write
// already on its way (see leasefence.Hold). For more than one resource, or
// a coordinator shared by many sessions, use New and leasefence.Hold.
//
// Errors are New's, leasefence.NewLockClient's and Hold's; after any of
// them nothing is held and nothing Lock started is left running. That
// includes ctx ending before Lock returns: Hold releases what it was
// granted (a grant whose reply came too late included) on a context of
// its own, bounded by leasefence.CleanupTimeout (see "Clean-up after an
// error" at leasefence.Hold).
func Lock(ctx context.Context, cli *clientv3.Client, resource string, opts LockOptions) (*leasefence.Session, error) {
	ttl := opts.TTL
	if ttl == 0 {
		ttl = DefaultLockTTL
	}
	coord, err := New(cli, Options{Prefix: opts.Prefix, TTL: ttl, Prover: opts.Prover})
	if err != nil {
		return nil, err
	}
	client, err := leasefence.NewLockClient(opts.Holder, ttl, opts.ClockSkew)
	if err != nil {
		_ = coord.Close()
		return nil, err
	}
	hold := opts.Hold
	theirs := hold.OnRelease
	hold.OnRelease = func() error {
		err := coord.Close()
		if theirs != nil {
			err = errors.Join(err, theirs())
		}
		return err
	}
	s, err := leasefence.Hold(ctx, coord, client, resource, hold)
	if err != nil {
		_ = coord.Close()
		return nil, err
	}
	return s, nil
}
