package realtime

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// What another process needs to take part in a run set up here: an agent
// run as a process of its own keeps its clock as the runner keeps an
// agent's, and lands its writes as the runner's agents do (it reaches the
// run's etcd and SQLite files by their adapters' Attach).

// NewAgentClock is an agent's clock as the runner keeps it: since reads
// true time since the run began; the clock reads it at the drift's rate,
// from its offset (a negative offset is taken up by a constant, so that
// the clock never reads below zero).
func NewAgentClock(name string, d agent.Drift, since func() time.Duration) agent.Clock {
	return newAgentClock(name, d, since)
}

func newAgentClock(name string, d agent.Drift, since func() time.Duration) *agentClock {
	c := &agentClock{offset: d.Offset + max(0, -d.Offset), rate: d.Rate}
	c.Clock = leasefence.NewClock(leasefence.Domain(name), func() time.Duration {
		return c.offset + time.Duration(float64(since())*c.rate)
	})
	return c
}

// CoordinatorClock is the coordinator's clock of a run whose coordinator
// keeps its own time (etcd): true time since the run began.
func CoordinatorClock(since func() time.Duration) leasefence.Clock {
	return leasefence.NewClock("coordinator", since)
}

// LandingKind is the kind of a write's landing by a contender of
// discipline d: a commit the gate admitted, or a naive write.
func LandingKind(d history.Discipline) history.Kind {
	if d == history.DisciplineNaive {
		return history.WriteLanded
	}
	return history.CommitAdmitted
}

// Fate is what became of one write, as its gate or resource answered.
type Fate struct {
	Landed bool
	// Floor is, for a refusal, the floor that refused the write.
	Floor leasefence.Token
	// NotLogged: the gate refused the write but could not log the
	// refusal (leasefence.ErrRefusalNotLogged). The write did not land.
	NotLogged bool
	// LeaseNotLive: the gate refused the write's lease, not its fence
	// (a *LeaseRefusedError).
	LeaseNotLive bool
}

// Refusal is the history's event of a refused write whose event, had it
// landed, would be tmpl, in a run of agents.
func (f Fate) Refusal(tmpl history.Event, agents []string) history.Event {
	tmpl.Kind = history.CommitRefused
	tmpl.Other, tmpl.OtherFence = slices.Index(agents, f.Floor.Holder), f.Floor.Fence
	switch {
	case f.LeaseNotLive && f.NotLogged:
		tmpl.Outcome = history.OutcomeLeaseNotLiveNotLogged
	case f.LeaseNotLive:
		tmpl.Outcome = history.OutcomeLeaseNotLive
	case f.NotLogged:
		tmpl.Outcome = history.OutcomeRefusalNotLogged
	}
	return tmpl
}

// Land makes write id under t at res: through the gate for a contender of
// the fenced discipline d, straight at the resource for a naive one, and
// says what became of it. An
// error is the store's (the write's fate unknown: only the resource's
// record can tell), and call names the call that failed.
func Land(ctx context.Context, res Resource, d history.Discipline, t leasefence.Token, id uint64) (fate Fate, call string, err error) {
	if d == history.DisciplineNaive {
		if err := res.Write(ctx, t, id); err != nil {
			return fate, "Write", err
		}
		return Fate{Landed: true}, "", nil
	}
	err = res.Commit(ctx, t, id)
	if err == nil {
		return Fate{Landed: true}, "", nil
	}
	var lease *LeaseRefusedError
	var stale *leasefence.StaleFenceError
	var unlogged *leasefence.RefusalNotLoggedError
	switch {
	case errors.As(err, &lease):
		return Fate{Floor: lease.Floor, NotLogged: lease.NotLogged, LeaseNotLive: true}, "", nil
	case errors.As(err, &stale):
		return Fate{Floor: leasefence.Token{Holder: stale.Rejection.FloorHolder, Fence: stale.Rejection.FloorFence}}, "", nil
	case errors.As(err, &unlogged) && unlogged.FloorHolder == "" && unlogged.FloorFence == 0:
		// The gate failed before it read the floor that refused the
		// write (sqlgate, its session cut in between): a refusal naming
		// no floor is no claim the history can hold to anything. The
		// write did not land, which the resource's record says for
		// itself; to the agent it is a store failure.
		return fate, "Commit", err
	case errors.As(err, &unlogged):
		return Fate{Floor: leasefence.Token{Holder: unlogged.FloorHolder, Fence: unlogged.FloorFence}, NotLogged: true}, "", nil
	case errors.Is(err, leasefence.ErrTokenConflict):
		floor, err := res.Floor(ctx)
		if err != nil {
			return fate, "Floor", err
		}
		return Fate{Floor: floor}, "", nil
	}
	return fate, "Commit", err
}

// Sleep waits d, or until ctx ends, and returns ctx's error if it ended.
func Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }
