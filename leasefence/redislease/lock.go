package redislease

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
)

// DefaultLockTTL is LockOptions.TTL when 0.
const DefaultLockTTL = 10 * time.Second

// LockOptions configures Lock. Its zero value is ready to use: every field
// has a default.
type LockOptions struct {
	// TTL is the lease: whole milliseconds, default DefaultLockTTL. The
	// session renews it in the background.
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
	// MinFence is Options.MinFence: every fence issued is above it.
	MinFence leasefence.Fence
	// Replication is Options.Replication: WAIT for replicas after every
	// fence minted (through Sentinel, say).
	Replication Replication
	// Watermark is Options.Watermark: the process's memory of the fences
	// it has seen, which no grant goes at or below.
	Watermark *Watermark
	// Hold configures the session: its renewal period, waits, the gates
	// that admit its token before Lock returns, its trace.
	Hold leasefence.HoldOptions
}

// Lock takes the lease on resource through Redis and keeps it in the
// background: the one call for a holder that needs nothing else. It makes
// a Coordinator on rdb, a leasefence.Client with the defaults above, and
// calls leasefence.Hold, which waits while another holder has the lease
// (within ctx, which bounds the acquisition only). The session's Release
// releases the lease; the coordinator runs nothing in the background, so
// there is nothing more to close, and rdb stays the caller's.
//
// A write under the session goes through a gate, with the session's token:
//
//	session, err := redislease.Lock(ctx, rdb, "deploy-slot", redislease.LockOptions{})
//	if err != nil { ... }
//	defer session.Release(context.Background())
//	err = gate.Commit(ctx, session.Token(), func(ctx context.Context, pipe redis.Pipeliner) error {
//		return pipe.Set(ctx, "{leasefence:}app:version", "v42", 0).Err()
//	})
//
// The session says when the lease is lost (Lost, Err, Context); that tells
// the holder to stop starting work, and only the gate refuses a write
// already on its way (see leasefence.Hold). Redis's own limits (see the
// package documentation) hold for Lock as for New.
//
// Errors are New's, leasefence.NewLockClient's and Hold's; after any of
// them nothing is held. That includes ctx ending before Lock returns: Hold
// releases what it was granted (a grant whose reply came too late
// included) on a context of its own, bounded by leasefence.CleanupTimeout
// (see "Clean-up after an error" at leasefence.Hold).
func Lock(ctx context.Context, rdb redis.UniversalClient, resource string, opts LockOptions) (*leasefence.Session, error) {
	ttl := opts.TTL
	if ttl == 0 {
		ttl = DefaultLockTTL
	}
	coord, err := New(rdb, Options{Prefix: opts.Prefix, TTL: ttl, MinFence: opts.MinFence, Replication: opts.Replication, Watermark: opts.Watermark})
	if err != nil {
		return nil, err
	}
	client, err := leasefence.NewLockClient(opts.Holder, ttl, opts.ClockSkew)
	if err != nil {
		return nil, err
	}
	return leasefence.Hold(ctx, coord, client, resource, opts.Hold)
}
