// Package pgadvisory puts PostgreSQL's session-level advisory lock under
// the lab as the contender pg-advisory, the way services take it: a
// connection from a pooled *sql.DB (pgx's database/sql driver), and
// pg_try_advisory_lock on it, held until pg_advisory_unlock on the same
// connection, which then goes back to the pool. It runs on the PostgreSQL
// $LEASEFENCE_PG_URL names (scripts/postgres.sh start starts one;
// eval "$(scripts/postgres.sh env)" names it), each run's locks keyed apart
// from every other run's.
//
// The lock has no TTL, and tells its holder nothing after the grant: the
// holder believes it holds the lock until it unlocks it, so a lease's
// Deadline is NoDeadline ahead, longer than any run. PostgreSQL keeps the
// lock while the session lives, so a holder paused for as long as it
// likes keeps it, and nobody takes over: such a run tests no exclusion.
// The lock ends with its session, and nothing tells the holder: a session
// the server terminates (pg_terminate_backend, a restart, an idle timeout)
// or the pool drops takes the lock with it, the next pg_try_advisory_lock
// is granted, and the old holder, which checked nothing it could, writes
// on: stale writes, with no fence to refuse them. A scenario's restarts
// play that fault: they terminate every session of the run's locks, and
// the history records the end of their leases (realtime.Contender's
// RestartEndsLeases), so a takeover after it is no violation of the lock.
//
// Renew asks the server whether the session still holds the lock (the
// check a careful holder can make; the runner renews a lease with no
// deadline never); Release is pg_advisory_unlock, whose false, or a
// connection the server ended, is ErrNotHeld. The lock numbers nothing:
// generations are the order in which the lab saw the grants.
package pgadvisory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/pgbackend"
	"github.com/leasefence/lab/registry"
)

func init() {
	registry.SetOpener(registry.Contenders, registry.PgAdvisory, realtime.ContenderOpener(func(ctx context.Context, _ string) (*realtime.Contender, error) {
		return Open(ctx)
	}))
	registry.SetOpener(registry.Contenders, registry.PgAdvisory, realtime.ContenderAttacher(func(_ context.Context, share string) (*realtime.Contender, error) {
		return Attach(share)
	}))
}

// NoDeadline is how far ahead a lease's Deadline is: the lock has none,
// and its holder believes it holds it until it unlocks it.
const NoDeadline = 365 * 24 * time.Hour

// Lock is pg_try_advisory_lock as a realtime.Lock, on DB's connections.
// Each resource is the bigint key Key(Salt, resource). Close closes DB.
type Lock struct {
	DB   *sql.DB
	Salt string
}

// Key is the advisory lock key of resource under salt: 62 bits of a hash,
// never negative, so that pg_locks shows it as classid (its high 32 bits)
// and objid (its low 32).
func Key(salt, resource string) int64 {
	h := fnv.New64a()
	h.Write([]byte(salt))
	h.Write([]byte{0})
	h.Write([]byte(resource))
	return int64(h.Sum64() >> 2)
}

// Close implements io.Closer.
func (l *Lock) Close() error { return l.DB.Close() }

// Acquire implements realtime.Lock: a connection from the pool, and one
// pg_try_advisory_lock on it; the connection goes back to the pool unless
// the lock is granted. The ttl is not the lock's: it has none.
func (l *Lock) Acquire(ctx context.Context, resource, _ string, _ time.Duration) (realtime.Lease, error) {
	conn, err := l.DB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgadvisory: a connection: %w", err)
	}
	key := Key(l.Salt, resource)
	sent := time.Now()
	var ok bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		conn.Close()
		return nil, fmt.Errorf("pgadvisory: locking %s: %w", resource, err)
	}
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("pgadvisory: %s: %w", resource, realtime.ErrHeld)
	}
	return &lease{conn: conn, key: key, resource: resource, deadline: sent.Add(NoDeadline)}, nil
}

type lease struct {
	conn     *sql.Conn
	key      int64
	resource string
	deadline time.Time

	mu     sync.Mutex
	closed bool
}

// Deadline implements realtime.Lease: NoDeadline from the lock's send.
func (le *lease) Deadline() time.Time { return le.deadline }

// Fence implements realtime.Lease: the lock has none.
func (*lease) Fence() (uint64, bool) { return 0, false }

// held is the query that says whether the session holds the lock on
// bigint key $1: pg_locks shows it as an advisory lock whose classid is
// the key's high 32 bits and objid its low 32, objsubid 1.
const held = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
	AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1)`

// Renew implements realtime.Lease: it asks the server whether the
// session still holds the lock, and extends nothing (there is nothing to
// extend). A lease found lost gives its connection back to the pool,
// which discards a broken one.
func (le *lease) Renew(ctx context.Context) error {
	var ok bool
	err := le.conn.QueryRowContext(ctx, held, le.key).Scan(&ok)
	if err != nil && ctx.Err() != nil {
		return err
	}
	if err == nil && ok {
		return nil
	}
	le.close()
	return le.lost("checking", err)
}

// Release implements realtime.Lease: pg_advisory_unlock on the lock's
// connection, which then goes back to the pool. PostgreSQL answers false
// for a lock the session does not hold.
func (le *lease) Release(ctx context.Context) error {
	var ok bool
	err := le.conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1)", le.key).Scan(&ok)
	if err != nil && ctx.Err() != nil {
		return err
	}
	le.close()
	if err == nil && ok {
		return nil
	}
	return le.lost("unlocking", err)
}

// lost is the error of a lease found no longer held: the session answered
// that it does not hold the lock (err nil), or the call failed on the
// session's connection, which a session-level lock does not outlive (the
// server ends the session of a connection that broke, and its locks with
// it).
func (le *lease) lost(doing string, err error) error {
	if err == nil {
		return fmt.Errorf("pgadvisory: %s %s: the session does not hold the lock: %w", doing, le.resource, realtime.ErrNotHeld)
	}
	return fmt.Errorf("pgadvisory: %s %s: the session is gone, and its lock with it (%v): %w", doing, le.resource, err, realtime.ErrNotHeld)
}

// close gives the connection back to the pool, once.
func (le *lease) close() {
	le.mu.Lock()
	defer le.mu.Unlock()
	if !le.closed {
		le.closed = true
		le.conn.Close()
	}
}

// share is how an agent's process reaches the contender's server: the
// URL, and the run's application name and key salt.
type share struct {
	URL  string `json:"url"`
	App  string `json:"app"`
	Salt string `json:"salt"`
}

// Open returns the contender pg-advisory on the PostgreSQL $LEASEFENCE_PG_URL
// names (pgbackend.ErrNoServer without one), its connections named by an
// application name of the run's own, its keys salted by it. A scenario's
// restarts terminate those connections' sessions.
func Open(ctx context.Context) (*realtime.Contender, error) {
	url, err := pgbackend.URL()
	if err != nil {
		return nil, fmt.Errorf("pgadvisory: %w", err)
	}
	app := pgbackend.RunName("leasefence_pg_advisory")
	admin, err := connect(url, app+"_admin")
	if err != nil {
		return nil, err
	}
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("pgadvisory: %s=%s: %w", pgbackend.EnvURL, url, err)
	}
	c, err := attach(share{URL: url, App: app, Salt: app})
	if err != nil {
		admin.Close()
		return nil, err
	}
	c.OnRestart = func(ctx context.Context, persist bool) error { return terminate(ctx, admin, app, persist) }
	c.RestartTarget = "pg-advisory's sessions (pg_terminate_backend)"
	c.RestartEndsLeases = true
	c.OnClose = admin.Close
	return c, nil
}

// ErrPersist: a restart that would lose the database's data, which
// terminating sessions does not.
var ErrPersist = errors.New("pgadvisory: a restart ends the lock's sessions and keeps the database's data: give it persist: true")

// terminate ends every session whose application name is app, and waits
// for each to exit (its locks released): PostgreSQL ends a session's
// advisory locks with it.
func terminate(ctx context.Context, admin *sql.DB, app string, persist bool) error {
	if !persist {
		return ErrPersist
	}
	if _, err := pgbackend.Terminate(ctx, admin, app); err != nil {
		return fmt.Errorf("pgadvisory: %w", err)
	}
	return nil
}

// connect is a pool of connections to url named app.
func connect(url, app string) (*sql.DB, error) {
	db, err := pgbackend.Connect(url, app)
	if err != nil {
		return nil, fmt.Errorf("pgadvisory: %w", err)
	}
	return db, nil
}

// Attach is the contender on the server and run another contender's
// Share names. Closing it closes its pools.
func Attach(sh string) (*realtime.Contender, error) {
	var s share
	if err := json.Unmarshal([]byte(sh), &s); err != nil {
		return nil, fmt.Errorf("pgadvisory: attaching: %w", err)
	}
	return attach(s)
}

func attach(s share) (*realtime.Contender, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	e := registry.Must(registry.Contenders, registry.PgAdvisory)
	info := e.Contender()
	info.Generations = realtime.GenerationsObserved
	return &realtime.Contender{
		Info: info,
		New: func(_ context.Context, mode history.Mode) (realtime.Lock, error) {
			db, err := connect(s.URL, s.App)
			if err != nil {
				return nil, err
			}
			return &Lock{DB: db, Salt: s.Salt + "/" + string(mode)}, nil
		},
		Share: string(b),
	}, nil
}
