package realtime

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdtest/etcdembed"
)

// What another process needs to take part in a run set up here: an agent
// run as a process of its own reaches the run's etcd under the run's
// prefix and the run's SQLite files, and keeps its clock as the runner
// keeps an agent's.

// Endpoints are the client URLs of the cluster the backend uses.
func (e *Etcd) Endpoints() []string {
	if e.cluster != nil {
		return e.cluster.Endpoints()
	}
	return e.opts.Endpoints
}

// AttachEtcd reaches the run whose keys are under prefix on the cluster at
// endpoints (another backend's Endpoints and Prefix). Its Close closes the
// client only: the keys, the cluster and its directory are the run's.
func AttachEtcd(endpoints []string, prefix string) (*Etcd, error) {
	if len(endpoints) == 0 || prefix == "" {
		return nil, errors.New("realtime: etcd: attaching needs the run's endpoints and prefix")
	}
	cli, err := etcdembed.Client(endpoints...)
	if err != nil {
		return nil, err
	}
	e := &Etcd{opts: EtcdOptions{Endpoints: endpoints, Members: 1}, prefix: prefix, attached: true}
	e.cli.Store(cli)
	return e, nil
}

// AttachSQLite opens the SQLite store whose files are in dir (another
// store's Dir). Its Close closes its databases and leaves dir.
func AttachSQLite(dir string) *SQLiteStore {
	return &SQLiteStore{dir: dir, dbs: make(map[history.Mode]*sql.DB), attached: true}
}

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

// LandingKind is the kind of a write's landing in mode: a commit the gate
// admitted, or a naive write.
func LandingKind(mode history.Mode) history.Kind {
	if mode == history.Naive {
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
}

// Refusal is the history's event of a refused write whose event, had it
// landed, would be tmpl, in a run of agents.
func (f Fate) Refusal(tmpl history.Event, agents []string) history.Event {
	tmpl.Kind = history.CommitRefused
	tmpl.Other, tmpl.OtherFence = slices.Index(agents, f.Floor.Holder), f.Floor.Fence
	if f.NotLogged {
		tmpl.Outcome = history.OutcomeRefusalNotLogged
	}
	return tmpl
}

// Land makes write id under t at res: through the gate in fenced mode,
// straight at the resource in naive mode, and says what became of it. An
// error is the store's (the write's fate unknown: only the resource's
// record can tell), and call names the call that failed.
func Land(ctx context.Context, res Resource, mode history.Mode, t leasefence.Token, id uint64) (fate Fate, call string, err error) {
	if mode == history.Naive {
		if err := res.Write(ctx, t, id); err != nil {
			return fate, "Write", err
		}
		return Fate{Landed: true}, "", nil
	}
	err = res.Commit(ctx, t, id)
	if err == nil {
		return Fate{Landed: true}, "", nil
	}
	var stale *leasefence.StaleFenceError
	var unlogged *leasefence.RefusalNotLoggedError
	switch {
	case errors.As(err, &stale):
		return Fate{Floor: leasefence.Token{Holder: stale.Rejection.FloorHolder, Fence: stale.Rejection.FloorFence}}, "", nil
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
