// Package pgbackend is the real-time runner's adapter for PostgreSQL: the
// backend postgres (Postgres: sqllease's Coordinator in each mode, its
// lease table in PostgreSQL) and the store postgres (Store: a sqlgate Gate
// per resource in the same database, its record a writes table each write
// inserts into, in the gate's transaction when fenced), on the PostgreSQL
// $LEASEFENCE_PG_URL names (scripts/postgres.sh start starts one;
// eval "$(scripts/postgres.sh env)" names it). Each run keeps its tables in
// a schema of its own, which closing the backend drops, and names its
// connections by an application name of its own. It registers both with
// the registry when linked (realtime/adapters links it). Its agents are
// goroutines, or processes of their own that reach the run's schema
// (attach.go), their sessions named as the run's.
//
// Its fault is the loss of every connection (the faults list's
// kill_connections, faults.go): each session of the run's coordinators
// and gates is terminated (pg_terminate_backend), an acquire, renewal or
// write in flight among them, and the pools open new ones. PostgreSQL
// keeps what it committed, leases, fences and floors included.
//
// The shared server is never restarted: a scenario that restarts the
// coordinator runs on a PostgreSQL of the run's own instead (restart.go,
// server.go), a cluster initdb makes in the run's temporary directory
// from the distribution's binaries (BinGlob, as scripts/postgres.sh finds
// them), served on a free loopback port, as the postgres user when the
// lab runs as root. Each restart crashes it (an immediate shutdown: every
// session ends, a write in flight among them) and starts it again on the
// same data, which it recovers from its write-ahead log: leases, fences
// and floors survive, so the history records the server's restart, not
// the coordinator's (realtime.LeaseKeeper), and the checker holds every
// lease to its expiry across it. A restart that loses the fence counter
// is refused (ErrRestartKeepsState), and so are restarts without the
// binaries (ErrNotInstalled).
package pgbackend

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// EnvURL names the variable that gives the lab its PostgreSQL, as
// scripts/postgres.sh env exports it.
const EnvURL = "LEASEFENCE_PG_URL"

// ErrNoServer: $LEASEFENCE_PG_URL names no server.
var ErrNoServer = errors.New(`no PostgreSQL: $LEASEFENCE_PG_URL is not set (scripts/postgres.sh start starts one; eval "$(scripts/postgres.sh env)" sets it)`)

// Available reports why nothing can run on PostgreSQL here (ErrNoServer),
// or nil.
func Available() error {
	if os.Getenv(EnvURL) == "" {
		return ErrNoServer
	}
	return nil
}

// URL is the PostgreSQL $LEASEFENCE_PG_URL names, or ErrNoServer.
func URL() (string, error) {
	u := os.Getenv(EnvURL)
	if u == "" {
		return "", ErrNoServer
	}
	return u, nil
}

// Connect is a pool of connections to url whose sessions are named app
// (pg_stat_activity's application_name), through pgx's database/sql
// driver.
func Connect(url, app string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	cfg.RuntimeParams["application_name"] = app
	return stdlib.OpenDB(*cfg), nil
}

// Ended is what Terminate ended: sessions, and of them those in a call,
// running a statement or inside a transaction (pg_stat_activity's state
// other than idle): a call cut in flight, whose caller gets no answer.
type Ended struct{ Sessions, InCall int }

// Add is e and o together.
func (e Ended) Add(o Ended) Ended {
	return Ended{Sessions: e.Sessions + o.Sessions, InCall: e.InCall + o.InCall}
}

// Terminate ends every session named app but the caller's own, and waits
// for each to exit: PostgreSQL rolls back its transaction and drops its
// session-level locks. It returns how many it ended. A session that
// ended by itself meanwhile (pg_terminate_backend then answers false) is
// ended too; one still there after the wait is an error.
func Terminate(ctx context.Context, admin *sql.DB, app string) (Ended, error) {
	rows, err := admin.QueryContext(ctx, `SELECT pid, coalesce(state, 'idle') <> 'idle', pg_terminate_backend(pid, 5000) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, app)
	if err != nil {
		return Ended{}, fmt.Errorf("terminating the sessions of %s: %w", app, err)
	}
	var n Ended
	var unsure []int64
	for rows.Next() {
		var pid int64
		var inCall, ended bool
		if err := rows.Scan(&pid, &inCall, &ended); err != nil {
			rows.Close()
			return n, err
		}
		if !ended {
			unsure = append(unsure, pid)
		}
		n.Sessions++
		if inCall {
			n.InCall++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return n, err
	}
	for _, pid := range unsure {
		var there bool
		if err := admin.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&there); err != nil {
			return n, err
		}
		if there {
			return n, fmt.Errorf("session %d of %s did not end within 5s", pid, app)
		}
	}
	return n, nil
}

// RunName is a name of the run's own, for its connections and its
// schema: letters, digits and underscores.
func RunName(prefix string) string {
	return prefix + "_" + strings.ToLower(rand.Text()[:12])
}

// Postgres is the backend of leases in PostgreSQL: in every mode
// sqllease's Coordinator, with the lease table of its own in the run's
// schema.
type Postgres struct {
	url    string
	schema string // the run's own: every table is in it
	db     *sql.DB
	admin  *sql.DB // named apart, so that a kill of the connections does not end its own session
	server *server // the run's own PostgreSQL (restart.go), or nil: the shared one

	mu     sync.Mutex
	closed bool
}

// New connects to the PostgreSQL at url and makes the run's schema.
// Close drops it, and every table in it.
func New(ctx context.Context, url string) (*Postgres, error) {
	schema := RunName("leasefence_run")
	db, err := Connect(url, schema)
	if err != nil {
		return nil, fmt.Errorf("realtime: postgres: %w", err)
	}
	admin, err := Connect(url, schema+"_admin")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("realtime: postgres: %w", err)
	}
	p := &Postgres{url: url, schema: schema, db: db, admin: admin}
	if _, err := p.admin.ExecContext(ctx, "CREATE SCHEMA "+p.schema); err != nil {
		p.Close()
		return nil, fmt.Errorf("realtime: postgres: %s=%s: %w", EnvURL, url, err)
	}
	return p, nil
}

// Name implements realtime.Backend.
func (*Postgres) Name() string { return registry.Postgres }

// Describe implements realtime.Describer.
func (p *Postgres) Describe() string {
	return fmt.Sprintf("postgres (sqllease and sqlgate in schema %s of $%s)", p.schema, EnvURL)
}

// table is the name of mode's table kind, in the run's schema.
func (p *Postgres) table(kind string, mode history.Mode) string {
	return p.schema + "." + kind + "_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(string(mode)))
}

// Open implements realtime.Backend.
func (p *Postgres) Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	return p.OpenLockDelay(ctx, mode, clock, ttl, 0)
}

// OpenLockDelay implements realtime.LockDelayer: sqllease.Options.LockDelay.
func (p *Postgres) OpenLockDelay(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl, delay time.Duration) (func() leasefence.Service, error) {
	opts := sqllease.Options{Table: p.table("leases", mode), TTL: ttl, Dialect: sqllease.Postgres, Clock: clock, LockDelay: delay}
	if err := sqllease.CreateSchema(ctx, p.db, opts); err != nil {
		return nil, fmt.Errorf("realtime: postgres: %w", err)
	}
	c, err := sqllease.New(p.db, opts)
	if err != nil {
		return nil, fmt.Errorf("realtime: postgres: %w", err)
	}
	return func() leasefence.Service { return c }, nil
}

// Close implements realtime.Backend: it drops the run's schema, and
// closes the connections. It is safe to call more than once.
func (p *Postgres) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	errs = append(errs, p.db.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.admin.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+p.schema+" CASCADE"); err != nil {
		errs = append(errs, fmt.Errorf("realtime: postgres: dropping schema %s: %w", p.schema, err))
	}
	errs = append(errs, p.admin.Close())
	if p.server != nil {
		errs = append(errs, p.server.close())
	}
	return errors.Join(errs...)
}

// check is realtime.Config.Check's part for the postgres backend: a
// server to run on, restarts it can play, and the time PostgreSQL keeps.
func check(c realtime.Config, sc spec.Scenario) error {
	bad := func(setting string, cause error, format string, args ...any) error {
		return &realtime.ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...), Err: cause}
	}
	if err := checkRestarts(sc.Restarts); err != nil {
		return err
	}
	if err := Missing(sc); err != nil {
		return bad("backend", err, "%v", err)
	}
	if sc.Clocks.CoordinatorDriftPPM != 0 {
		return bad("scenario", realtime.ErrUnmappable, "PostgreSQL keeps its own time: clocks.coordinator_drift_ppm must be 0, got %v", sc.Clocks.CoordinatorDriftPPM)
	}
	scaled := realtime.Scale(sc, cmp.Or(c.TimeScale, 1))
	if ttl := scaled.TTL; ttl%time.Microsecond != 0 {
		return bad("time-scale", realtime.ErrUnmappable, "the ttl becomes %v, and PostgreSQL's clock counts whole microseconds", ttl)
	}
	if d := scaled.LockDelay; d%time.Microsecond != 0 {
		return bad("time-scale", realtime.ErrUnmappable, "the lock_delay becomes %v, and PostgreSQL's clock counts whole microseconds", d)
	}
	return nil
}

func init() {
	registry.SetOpener(registry.Backends, registry.Postgres, realtime.BackendAdapter{Check: check, Open: func(ctx context.Context, s *realtime.Setup, sc spec.Scenario) error {
		p, err := open(ctx, s.Config, sc)
		if err != nil {
			return err
		}
		s.Backend, s.Scale = p, cmp.Or(s.Config.TimeScale, 1)
		s.Scenario = realtime.Scale(sc, s.Scale)
		return nil
	}})
	registry.SetOpener(registry.Stores, registry.Postgres, realtime.StoreOpener(func(s *realtime.Setup) (realtime.Store, error) {
		return Store{P: s.Backend.(*Postgres), Lease: SettingsOf(s.Config).Gate == GateLease}, nil
	}))
}
