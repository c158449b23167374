package pgbackend

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// A scenario that restarts the coordinator needs the server's binaries,
// not $LEASEFENCE_PG_URL, and restarts that keep the fence counter: each
// refusal is a ConfigError naming what is missing.
func TestRestartsAreChecked(t *testing.T) {
	sc := spec.Scenario{Name: "s", Agents: 1, Resources: 1, TTL: time.Second, Duration: 2 * time.Second,
		Restarts: []spec.Restart{{At: time.Second, Persist: true}}}
	if err := registry.Must(registry.Backends, registry.Postgres).CanPlay(sc); err != nil {
		t.Errorf("the registry refuses the postgres backend's restarts: %v", err)
	}
	c := realtime.Config{Backend: registry.Postgres}
	lost := sc
	lost.Restarts = []spec.Restart{{At: time.Second}}
	if err := c.Check(lost); !errors.Is(err, ErrRestartKeepsState) || !errors.Is(err, realtime.ErrBadConfig) {
		t.Errorf("a restart that loses the counter: %v, want a ConfigError matching ErrRestartKeepsState", err)
	}
	t.Setenv(EnvURL, "") // a server of the run's own needs no shared one
	binGlob = filepath.Join(t.TempDir(), "*", "bin")
	t.Cleanup(func() { binGlob = BinGlob })
	err := c.Check(sc)
	var ce *realtime.ConfigError
	if !errors.As(err, &ce) || ce.Setting != "backend" || !errors.Is(err, ErrNotInstalled) {
		t.Errorf("restarts without the server's binaries: %v, want a ConfigError of the backend matching ErrNotInstalled", err)
	}
	if _, err := NewServer(t.Context(), t.TempDir()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("a server without the binaries: %v, want ErrNotInstalled", err)
	}
}

// OwnServer is a backend on a PostgreSQL of its own, closed at the end of
// the test, or skips the test when the server's binaries are not
// installed.
func OwnServer(t *testing.T) *Postgres {
	t.Helper()
	if _, err := Installed(); err != nil {
		t.Skipf("the test starts a PostgreSQL of its own: %v", err)
	}
	// The system's temporary directory: a test's own is closed to the
	// postgres user a root test runs the server as.
	p, err := NewServer(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// forgetful is a PostgreSQL whose restart loses its leases yet keeps its
// fences, and says it kept them: a broken backend the checker must catch.
type forgetful struct{ *Postgres }

func (f forgetful) Restart(ctx context.Context, persist bool) error {
	if err := f.Postgres.Restart(ctx, persist); err != nil {
		return err
	}
	for _, m := range registry.Modes() {
		if _, err := f.db.ExecContext(ctx, "UPDATE "+f.table("leases", m)+" SET expires_us = 0"); err != nil {
			return err
		}
	}
	return nil
}

// restartScript: agent-1 takes res-1's 4s lease at 0 and writes; the
// server restarts at 500ms; agent-2 asks at 1s, inside agent-1's lease
// (the restart holds its call back while the server is down: 3s spare),
// and again at 4.5s, 5s and 5.5s, after it (the grant of agent-1's lease
// may be late by a second), then writes; agent-1 writes again at 5.9s,
// its lease over.
var restartScript = spec.Scenario{Name: "restart-script", Seed: 1, Duration: 6200 * time.Millisecond, Agents: 2, Resources: 1,
	TTL: 4 * time.Second, Agent: spec.Behaviour{WritesPerLease: 1},
	Restarts: []spec.Restart{{At: 500 * time.Millisecond, Persist: true}},
	Script: []spec.Action{
		{At: 0, Agent: "agent-1", Do: spec.ActAcquire},
		{At: 300 * time.Millisecond, Agent: "agent-1", Do: spec.ActCheck},
		{At: 300 * time.Millisecond, Agent: "agent-1", Do: spec.ActWrite},
		{At: time.Second, Agent: "agent-2", Do: spec.ActAcquire},
		{At: 4500 * time.Millisecond, Agent: "agent-2", Do: spec.ActAcquire},
		{At: 5000 * time.Millisecond, Agent: "agent-2", Do: spec.ActAcquire},
		{At: 5500 * time.Millisecond, Agent: "agent-2", Do: spec.ActAcquire},
		{At: 5700 * time.Millisecond, Agent: "agent-2", Do: spec.ActCheck},
		{At: 5700 * time.Millisecond, Agent: "agent-2", Do: spec.ActWrite},
		{At: 5900 * time.Millisecond, Agent: "agent-1", Do: spec.ActWrite},
	}}

// run plays restartScript on b, and returns its result and history.
func run(t *testing.T, b realtime.Backend, p *Postgres) (*realtime.Result, []history.Event) {
	t.Helper()
	res, file := runtest.RunRecorded(t, restartScript, realtime.Options{Backend: b, Store: Store{P: p}})
	_, events, err := history.Decode(bytes.NewReader(file), "run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

// A restart of PostgreSQL keeps the leases, and the history says so: it
// records the server's restart, not the coordinator's, so the checker
// holds agent-1's lease across it. The server refuses agent-2 inside the
// lease, and grants it after; a server that forgot the lease in its
// restart grants it inside, and the checker calls that a violation.
func TestRestartKeepsTheLeasesInTheHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PostgreSQL for several seconds")
	}
	for _, broken := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "forgetful"}[broken], func(t *testing.T) {
			t.Parallel()
			p := OwnServer(t)
			var b realtime.Backend = p
			if broken {
				b = forgetful{p}
			}
			res, events := run(t, b, p)
			for _, m := range registry.Modes() {
				rep := res.Modes[m]
				var restarts, forgot, refusedInside int
				end := time.Duration(-1) // agent-1's lease's expiry
				for _, e := range events {
					switch {
					case e.Mode != m:
					case e.Kind == history.CoordinatorRestarted:
						forgot++
					case e.Kind == history.FaultBegan && e.Fault == string(spec.FaultRestart) && e.Target == "postgres server of "+p.schema:
						restarts++
					case e.Kind == history.Granted && e.Agent == 0:
						end = e.Deadline
					case e.Kind == history.Denied && e.Agent == 1 && e.At < end:
						refusedInside++
					}
				}
				if restarts != 1 || forgot != 0 {
					t.Errorf("%s: %d restarts of the server and %d of the coordinator recorded, want 1 and 0", m, restarts, forgot)
				}
				if broken {
					if rep.MutualExclusionViolations == 0 {
						t.Errorf("%s: a grant inside a lease the restart forgot, and no violation (%d takeovers)", m, rep.Takeovers)
					}
					continue
				}
				if refusedInside != 1 || rep.MutualExclusionViolations != 0 || rep.Takeovers != 1 || rep.FenceReuses != 0 {
					t.Errorf("%s: agent-2 refused %d times inside agent-1's lease, %d violations, %d takeovers, %d fences reused; want 1, 0, 1, 0",
						m, refusedInside, rep.MutualExclusionViolations, rep.Takeovers, rep.FenceReuses)
				}
			}
			if broken {
				return
			}
			if f := res.Modes[history.Fenced]; f.CommitsRefused != 1 || f.StaleWritesLanded != 0 || f.UnexplainedRefusals != 0 {
				t.Errorf("fenced: %d refused, %d stale landed, %d unexplained; want agent-1's late write refused", f.CommitsRefused, f.StaleWritesLanded, f.UnexplainedRefusals)
			}
		})
	}
}

// A restart is a crash: the server starts again on its data, recovering
// it from the write-ahead log, and every session of before has ended.
func TestRestartIsACrash(t *testing.T) {
	p := OwnServer(t)
	ctx := t.Context()
	before, err := p.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	var started, again time.Time
	if err := before.QueryRowContext(ctx, "SELECT pg_postmaster_start_time()").Scan(&started); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := before.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Error("a session of before the restart still answers")
	}
	if err := p.db.QueryRowContext(ctx, "SELECT pg_postmaster_start_time()").Scan(&again); err != nil || !again.After(started) {
		t.Errorf("the server started at %v, and at %v after the restart (%v)", started, again, err)
	}
	if log, err := os.ReadFile(p.server.logFile()); err != nil || !strings.Contains(string(log), "automatic recovery in progress") {
		t.Errorf("the server did not recover from a crash (%v)%s", err, p.server.logTail())
	}
}
