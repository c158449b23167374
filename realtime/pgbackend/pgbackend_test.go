package pgbackend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/pgbackend"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// The kill of the connections is a fault of the faults list that only the
// postgres backend plays.
func TestOnlyPostgresKillsConnections(t *testing.T) {
	sc := spec.Scenario{Name: "s", Agents: 1, Resources: 1, TTL: time.Second, Duration: 2 * time.Second,
		Faults: []spec.TimedFault{{At: time.Second, Do: spec.FaultKillConnections, Duration: 500 * time.Millisecond}}}
	if got := registry.Where(sc); len(got) != 1 || got[0] != registry.Postgres {
		t.Errorf("kill_connections runs on %v, want postgres alone", got)
	}
}

// open is the backend on the PostgreSQL $LEASEFENCE_PG_URL names, or
// skips the test when none is named.
func open(t *testing.T) *pgbackend.Postgres {
	t.Helper()
	url, err := pgbackend.URL()
	if err != nil {
		t.Skip(err)
	}
	p, err := pgbackend.New(t.Context(), url)
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

func TestNoServerNamesTheScript(t *testing.T) {
	t.Setenv(pgbackend.EnvURL, "")
	if _, err := pgbackend.URL(); !errors.Is(err, pgbackend.ErrNoServer) {
		t.Fatalf("URL without %s: %v", pgbackend.EnvURL, err)
	}
	c := realtime.Config{Backend: registry.Postgres}
	err := c.Check(spec.Scenario{Name: "s", Agents: 1, Resources: 1, TTL: time.Second, Duration: time.Second})
	if !errors.Is(err, pgbackend.ErrNoServer) {
		t.Errorf("a run on postgres without a server: %v, want ErrNoServer naming scripts/postgres.sh", err)
	}
}

// A kill of the connections terminates the sessions of the run's
// coordinators and gates: PostgreSQL keeps the lease, its fence and the
// floor, the pools open new connections, and a retried acquire gets the
// grant already made. The shared server is not restarted.
func TestKillingTheConnectionsKeepsTheState(t *testing.T) {
	ctx := t.Context()
	p := open(t)
	if err := p.CheckRestart(true); !errors.Is(err, pgbackend.ErrNoRestart) {
		t.Errorf("a restart: %v, want ErrNoRestart", err)
	}
	if err := p.Restart(ctx, true); !errors.Is(err, pgbackend.ErrNoRestart) {
		t.Errorf("a restart: %v, want ErrNoRestart", err)
	}
	keepsState(t, p, func(ctx context.Context) {
		kill, err := p.BeginFault(ctx, spec.TimedFault{Do: spec.FaultKillConnections, Duration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if target, detail := kill.Began(); target == "" || !strings.Contains(detail, "sessions terminated") || strings.HasPrefix(detail, "0 ") {
			t.Errorf("the kill began on %q, %q: want the coordinator's and the gate's sessions", target, detail)
		}
		if out := kill.End(ctx); out.Err != nil {
			t.Fatal(out.Err)
		}
	})
}

// A restart of a PostgreSQL of the backend's own crashes it, and it
// starts again on its data: it keeps the lease, its fence and the floor,
// the pools open new connections, and a retried acquire gets the grant
// already made. A restart that loses the counter is refused.
func TestRestartKeepsTheState(t *testing.T) {
	p := pgbackend.OwnServer(t)
	if err := p.CheckRestart(false); !errors.Is(err, pgbackend.ErrRestartKeepsState) {
		t.Errorf("a restart that loses the counter: %v, want ErrRestartKeepsState", err)
	}
	if err := p.Restart(t.Context(), false); !errors.Is(err, pgbackend.ErrRestartKeepsState) {
		t.Errorf("a restart that loses the counter: %v, want ErrRestartKeepsState", err)
	}
	keepsState(t, p, func(ctx context.Context) {
		if err := p.Restart(ctx, true); err != nil {
			t.Fatal(err)
		}
	})
}

// keepsState takes a lease and writes under it, strikes p, and checks
// that PostgreSQL kept the lease, its fence and the floor: the same
// request gets the same grant, another holder is refused, and the next
// lease's fence is higher. The lease lasts far longer than a strike.
func keepsState(t *testing.T, p *pgbackend.Postgres, strike func(context.Context)) {
	t.Helper()
	ctx := t.Context()
	svc, err := p.Open(ctx, history.Fenced, leasefence.NewMonotonicClock("test"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pgbackend.Store{P: p}.Resource(ctx, history.Fenced, "r", func() time.Duration { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	req := leasefence.AcquireRequest{RequestID: "req-1", Resource: "r", Holder: "a"}
	got, err := svc().Acquire(ctx, req)
	if err != nil || !got.OK {
		t.Fatalf("acquire: %+v %v", got, err)
	}
	tok := got.Grant.Token
	if err := res.Commit(ctx, tok, 1); err != nil {
		t.Fatal(err)
	}
	strike(ctx)
	// A call on a connection the server ended fails (no answer was had),
	// and the caller resends the same request, as leasefence.Hold does:
	// database/sql keeps at most two idle connections, each failing its
	// next call once.
	var again leasefence.AcquireOutcome
	for range 3 {
		if again, err = svc().Acquire(ctx, req); err == nil {
			break
		}
	}
	if err != nil || !again.OK || again.Grant.Token != tok {
		t.Fatalf("the same request after the restart: %+v %v, want the grant %v", again, err, tok)
	}
	if other, err := svc().Acquire(ctx, leasefence.AcquireRequest{RequestID: "req-2", Resource: "r", Holder: "b"}); err != nil || other.OK {
		t.Fatalf("another holder after the restart: %+v %v, want held", other, err)
	}
	if floor, err := res.Floor(ctx); err != nil || floor != tok {
		t.Errorf("floor after the restart: %v %v, want %v", floor, err, tok)
	}
	if err := res.Commit(ctx, tok, 2); err != nil {
		t.Fatal(err)
	}
	if out, err := svc().Release(ctx, tok); err != nil || !out.OK {
		t.Fatalf("release: %+v %v", out, err)
	}
	next, err := svc().Acquire(ctx, leasefence.AcquireRequest{RequestID: "req-3", Resource: "r", Holder: "b"})
	if err != nil || !next.OK || next.Grant.Token.Fence <= tok.Fence {
		t.Fatalf("the next holder: %+v %v, want a fence above %d", next, err, tok.Fence)
	}
	if err := res.Commit(ctx, next.Grant.Token, 3); err != nil {
		t.Fatal(err)
	}
	if err := res.Commit(ctx, tok, 4); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Errorf("the old holder's write after the new one's: %v, want ErrStaleFence", err)
	}
	landed, err := res.Landings(ctx)
	if err != nil || len(landed) != 3 || landed[0].ID != 1 || landed[1].ID != 2 || landed[2].ID != 3 {
		t.Errorf("landings %v %v, want writes 1, 2 and 3", landed, err)
	}
}

// Terminate ends the sessions of one name only, and says how many, and
// how many of them were in a call.
func TestTerminateEndsOnlyTheNamedSessions(t *testing.T) {
	url, err := pgbackend.URL()
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	app, other := pgbackend.RunName("leasefence_test"), pgbackend.RunName("leasefence_test")
	for _, name := range []string{app, other} {
		db, err := pgbackend.Connect(url, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := db.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := pgbackend.Connect(url, app+"_admin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	n, err := pgbackend.Terminate(ctx, admin, app)
	if err != nil || n != (pgbackend.Ended{Sessions: 1}) {
		t.Fatalf("Terminate: %+v, %v; want the one idle session named %s", n, err, app)
	}
	if n, err := pgbackend.Terminate(ctx, admin, other); err != nil || n != (pgbackend.Ended{Sessions: 1}) {
		t.Fatalf("Terminate of the other name: %+v, %v; want 1 idle, still there", n, err)
	}
	// A session inside a transaction is in a call: the caller waits for
	// the rest of it.
	busy := pgbackend.RunName("leasefence_test")
	db, err := pgbackend.Connect(url, busy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if n, err := pgbackend.Terminate(ctx, admin, busy); err != nil || n != (pgbackend.Ended{Sessions: 1, InCall: 1}) {
		t.Fatalf("Terminate of a session in a transaction: %+v, %v; want 1, in a call", n, err)
	}
}
