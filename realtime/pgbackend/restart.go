package pgbackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// A scenario that restarts the coordinator runs on a PostgreSQL of the
// run's own (server.go), which a restart crashes and starts again on the
// same data. The shared server ($LEASEFENCE_PG_URL) is never restarted.

// ErrNoRestart: the PostgreSQL the run uses is shared, not the lab's to
// restart.
var ErrNoRestart = errors.New("realtime: postgres: the server is shared and not the lab's to restart: a scenario with restarts runs on a PostgreSQL of the run's own")

// ErrRestartKeepsState: a restart that loses the fence counter (persist:
// false), which a restart of PostgreSQL cannot play.
var ErrRestartKeepsState = errors.New("a PostgreSQL restart keeps what the server committed (its recovery replays the write-ahead log), the fence counter with the leases and the floors: " +
	"a restart that loses it would be a new, empty cluster, in which the run's coordinators and gates find none of their tables; give each restart persist: true (--restart AT:persist)")

// checkRestarts is check's part for a scenario's restarts: each keeps the
// fence counter.
func checkRestarts(rs []spec.Restart) error {
	for i, r := range rs {
		if !r.Persist {
			return &realtime.ConfigError{Setting: "scenario", Problem: fmt.Sprintf("restarts[%d] loses the fence counter: %v", i, ErrRestartKeepsState), Err: ErrRestartKeepsState}
		}
	}
	return nil
}

// Missing reports what a run of sc on the backend needs that this
// machine lacks: the binaries to start a PostgreSQL of the run's own when
// sc restarts the coordinator (ErrNotInstalled), else the shared server
// (ErrNoServer); nil for nothing.
func Missing(sc spec.Scenario) error {
	if len(sc.Restarts) == 0 {
		return Available()
	}
	if _, err := Installed(); err != nil {
		return fmt.Errorf("the scenario restarts the coordinator, which runs on a PostgreSQL of the run's own: %w", err)
	}
	return nil
}

// open is the backend a run of sc on c plays on: a PostgreSQL of the
// run's own, under c.TempDir, when sc restarts the coordinator; else the
// shared one $LEASEFENCE_PG_URL names.
func open(ctx context.Context, c realtime.Config, sc spec.Scenario) (*Postgres, error) {
	if len(sc.Restarts) == 0 {
		url, err := URL()
		if err != nil {
			return nil, err
		}
		return New(ctx, url)
	}
	return NewServer(ctx, c.TempDir)
}

// NewServer starts a PostgreSQL of the backend's own, its cluster made by
// initdb under tempDir ("" for the system's temporary directory), on a
// free loopback port, and connects to it as New does. Restart crashes and
// restarts it; Close stops it and removes its directory.
func NewServer(ctx context.Context, tempDir string) (*Postgres, error) {
	s, err := startServer(ctx, tempDir)
	if err != nil {
		return nil, fmt.Errorf("realtime: postgres: %w", err)
	}
	p, err := New(ctx, s.URL())
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	p.server = s
	return p, nil
}

// CheckRestart implements realtime.RestartChecker: only a server of the
// backend's own restarts (ErrNoRestart), keeping its state
// (ErrRestartKeepsState).
func (p *Postgres) CheckRestart(persist bool) error {
	if p.server == nil {
		return ErrNoRestart
	}
	if !persist {
		return fmt.Errorf("realtime: postgres: %w", ErrRestartKeepsState)
	}
	return nil
}

// Restart implements realtime.Backend: the server crashes (an immediate
// shutdown: every session ends, an acquire, renewal or write in flight
// among them, with no checkpoint) and starts again on the same data and
// port, recovering from its write-ahead log what it committed: leases,
// fences and floors. It returns once the server answers again. The pools'
// idle connections, whose sessions ended, are closed; the pools open new
// ones as they are asked for.
func (p *Postgres) Restart(ctx context.Context, persist bool) error {
	if err := p.CheckRestart(persist); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("realtime: postgres: restart after Close")
	}
	if err := p.server.restart(ctx); err != nil {
		return fmt.Errorf("realtime: postgres: %w", err)
	}
	dropIdle(p.db)
	dropIdle(p.admin)
	return nil
}

// RestartKeepsLeases implements realtime.LeaseKeeper: a restart keeps
// every lease the coordinators granted, with the fences and the floors.
func (p *Postgres) RestartKeepsLeases() (target string, kept bool) {
	return "postgres server of " + p.schema, true
}
