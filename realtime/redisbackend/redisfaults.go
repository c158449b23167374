package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/history"
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
// end (realtime's, 30s).
const demoteTimeout = 25 * time.Second

var (
	// ErrNoTopology: a fault of the primary on a backend that is not the
	// sentinel topology.
	ErrNoTopology = errors.New("realtime: redis: faults of the primary need the sentinel topology")
	// ErrNoFailover: a fault of the primary ended, or the run did, before
	// a replica was promoted; the run did not put the failover to the
	// test, and fails.
	ErrNoFailover = errors.New("no replica was promoted during the fault")
)

// redisFault is one fault being played.
type redisFault struct {
	r      *Redis
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

// BeginFault implements realtime.FaultPlayer: it strikes the primary with
// f's kind (spec.RedisFaults), and waits for the failover in the
// background. One fault at a time: it waits for the one before to end.
func (r *Redis) BeginFault(ctx context.Context, f spec.TimedFault) (realtime.ActiveFault, error) {
	return r.beginFault(ctx, f.Do)
}

func (r *Redis) beginFault(ctx context.Context, kind spec.Fault) (*redisFault, error) {
	if r.deploy == nil {
		return nil, ErrNoTopology
	}
	select {
	case r.faultTurn() <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f, err := r.strike(ctx, kind)
	if err != nil {
		<-r.faultTurn()
		return nil, err
	}
	return f, nil
}

// faultTurn is held by the fault of the primary in force.
func (r *Redis) faultTurn() chan struct{} {
	r.faultOnce.Do(func() { r.faulting = make(chan struct{}, 1) })
	return r.faulting
}

// strike begins a fault of kind on the primary of the moment.
func (r *Redis) strike(ctx context.Context, kind spec.Fault) (*redisFault, error) {
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
	f := &redisFault{r: r, d: r.deploy, kind: kind, victim: victim, began: time.Now(), done: make(chan struct{})}
	var wctx context.Context
	wctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(f.done)
		f.promoted, f.waitErr = r.deploy.WaitFailover(wctx, victim.Addr())
		f.after = time.Since(f.began)
	}()
	return f, nil
}

// Began implements realtime.ActiveFault: the primary struck.
func (f *redisFault) Began() (target, detail string) { return spec.RedisTarget(f.victim.Name), "" }

// End implements realtime.ActiveFault: it stops waiting for the failover,
// undoes the fault, and brings the old primary back as a replica of the
// promoted one. Its outcome is failed_over when a replica was promoted,
// and its error ErrNoFailover when none was; an old primary that failed
// over but did not come back as a replica in time fails nothing the run
// judged: its detail says so.
func (f *redisFault) End(ctx context.Context) realtime.FaultOutcome {
	defer func() { <-f.r.faultTurn() }()
	out := f.end(ctx)
	if out.Err != nil {
		out.Detail = out.Err.Error()
	}
	return out
}

func (f *redisFault) end(ctx context.Context) realtime.FaultOutcome {
	// A promotion in the last moments is still seen: the wait polls.
	select {
	case <-f.done:
	case <-time.After(250 * time.Millisecond):
	}
	f.cancel()
	<-f.done
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
		return realtime.FaultOutcome{Err: fmt.Errorf("%w in %v: %v", ErrNoFailover, time.Since(f.began).Round(time.Millisecond), f.waitErr)}
	}
	out := realtime.FaultOutcome{Outcome: history.OutcomeFailedOver,
		Detail: fmt.Sprintf("%s promoted %v after, %s back as its replica", f.promoted.Name, f.after.Round(time.Millisecond), f.victim.Name)}
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
		out.Detail = fmt.Sprintf("%s promoted %v after; %s not back as a replica: %v", f.promoted.Name, f.after.Round(time.Millisecond), f.victim.Name, undo)
	}
	return out
}
