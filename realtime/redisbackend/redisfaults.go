package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// The faults of the sentinel topology, each played on whichever server is
// the primary when it begins, until the Sentinels promote a replica:
//
//   - pause: SIGSTOP; the primary answers nothing, as a frozen VM. Resumed,
//     it is a primary that is no longer the Sentinels'.
//   - kill: SIGKILL, as a power cut; restarted on its append-only file, it
//     comes back a primary of its own.
//   - partition: cut off from its replicas and the Sentinels while clients
//     still reach it (redisdeploy.Partition: the deployment's own ACL user
//     turned off). It keeps applying the writes of clients whose route to
//     it is not yet stale: writes no replica receives, and which the
//     failover discards.
//
// Each ends with the old primary back as a replica of the promoted one
// (redisdeploy.Demote), and the deployment settled (redisdeploy.WaitSettled). The Sentinels do that themselves once they have
// seen it back for a few of their INFO rounds (about 8s); the run does it
// at once, because no client of the run reaches the old primary through
// the Sentinels meanwhile, so waiting would change nothing but the run's
// length.

// demoteTimeout bounds the old primary's resync as a replica and the
// deployment's settling after it, below the run's own bound on a fault's
// end (realtime's primaryFaultEnd, 30s).
const demoteTimeout = 25 * time.Second

// ErrNoTopology: a fault of the primary on a backend that is not the
// sentinel topology.
var ErrNoTopology = errors.New("realtime: redis: faults of the primary need the sentinel topology")

// redisFault is one fault being played.
type redisFault struct {
	d      *redisdeploy.Deployment
	kind   spec.Fault
	victim *redisdeploy.Server
	began  time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed when the wait for the failover ends
	// Set before done is closed.
	promoted *redisdeploy.Server
	after    time.Duration // from the fault's beginning to the promotion
	waitErr  error
}

// BeginPrimaryFault implements realtime.PrimaryFaulter: it strikes the primary with
// kind, and waits for the failover in the background.
func (r *Redis) BeginPrimaryFault(ctx context.Context, kind spec.Fault) (realtime.PrimaryFault, error) {
	return r.beginFault(ctx, kind)
}

func (r *Redis) beginFault(ctx context.Context, kind spec.Fault) (*redisFault, error) {
	if r.deploy == nil {
		return nil, ErrNoTopology
	}
	victim, err := r.deploy.Primary(ctx)
	if err != nil {
		return nil, err
	}
	switch kind {
	case spec.FaultPausePrimary:
		err = victim.Pause()
	case spec.FaultKillPrimary:
		victim.Kill()
	case spec.FaultPartitionPrimary:
		err = r.deploy.Partition(ctx, victim)
	default:
		err = fmt.Errorf("realtime: redis: no fault %q", kind)
	}
	if err != nil {
		return nil, err
	}
	f := &redisFault{d: r.deploy, kind: kind, victim: victim, began: time.Now(), done: make(chan struct{})}
	var wctx context.Context
	wctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(f.done)
		f.promoted, f.waitErr = r.deploy.WaitFailover(wctx, victim.Addr())
		f.after = time.Since(f.began)
	}()
	return f, nil
}

// Victim implements realtime.PrimaryFault.
func (f *redisFault) Victim() string { return f.victim.Name }

// End implements realtime.PrimaryFault: it stops waiting for the failover, undoes
// the fault, and brings the old primary back as a replica of the promoted
// one.
func (f *redisFault) End(ctx context.Context) realtime.PrimaryFaultOutcome {
	// A promotion in the last moments is still seen: the wait polls.
	select {
	case <-f.done:
	case <-time.After(250 * time.Millisecond):
	}
	f.cancel()
	<-f.done
	out := realtime.PrimaryFaultOutcome{Victim: f.victim.Name}
	var undo error
	switch f.kind {
	case spec.FaultPausePrimary:
		undo = f.victim.Resume()
	case spec.FaultKillPrimary:
		undo = f.victim.Restart(ctx)
	case spec.FaultPartitionPrimary:
		undo = f.d.Heal(ctx, f.victim)
	}
	if f.waitErr != nil {
		out.Err = fmt.Errorf("%w in %v: %v", realtime.ErrNoFailover, time.Since(f.began).Round(time.Millisecond), f.waitErr)
		return out
	}
	out.Promoted, out.After = f.promoted.Name, f.after
	if undo == nil {
		// Bounded below the run's own bound on a fault's end: an old
		// primary slow to resync is said in the fault's end, and the run
		// goes on.
		dctx, cancel := context.WithTimeout(ctx, demoteTimeout)
		defer cancel()
		undo = f.d.Demote(dctx, f.victim, f.promoted)
		if undo == nil {
			// The next fault finds Sentinels that all know the new
			// primary and its replicas, ready to fail it over in turn.
			undo = f.d.WaitSettled(dctx)
		}
	}
	if undo != nil {
		out.Err = fmt.Errorf("realtime: redis: %s not back as a replica: %w", f.victim.Name, undo)
	}
	return out
}
