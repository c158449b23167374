package pgbackend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// killEvery is how often a kill of the connections terminates the
// sessions opened since, until it ends.
const killEvery = 100 * time.Millisecond

// idleConns is database/sql's default number of idle connections a pool
// keeps, which dropIdle restores after closing them.
const idleConns = 2

// dropIdle closes db's idle connections, whose sessions the server may
// have ended: the first call on each would fail once more.
func dropIdle(db *sql.DB) {
	db.SetMaxIdleConns(0)
	db.SetMaxIdleConns(idleConns)
}

// BeginFault implements realtime.FaultPlayer: kill_connections
// terminates every session of the run's coordinators and gates now, and
// every one they open again each killEvery, until it ends. PostgreSQL
// rolls back each cut call's transaction and keeps what was committed:
// leases, fences and floors.
func (p *Postgres) BeginFault(ctx context.Context, f spec.TimedFault) (realtime.ActiveFault, error) {
	if f.Do != spec.FaultKillConnections {
		return nil, fmt.Errorf("realtime: postgres: no fault %q", f.Do)
	}
	n, err := Terminate(ctx, p.admin, p.schema)
	if err != nil {
		return nil, fmt.Errorf("realtime: postgres: %w", err)
	}
	k := &killing{p: p, first: n, total: n, stop: make(chan struct{}), done: make(chan struct{})}
	go k.loop()
	return k, nil
}

// killing is a kill of the connections under way.
type killing struct {
	p     *Postgres
	first Ended
	stop  chan struct{}
	done  chan struct{}
	// Set by loop, read once done is closed.
	total Ended
	errs  []error
}

func (k *killing) loop() {
	defer close(k.done)
	t := time.NewTicker(killEvery)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := Terminate(ctx, k.p.admin, k.p.schema)
		cancel()
		k.total = k.total.Add(n)
		if err != nil {
			k.errs = append(k.errs, err)
			return
		}
	}
}

// Began implements realtime.ActiveFault.
func (k *killing) Began() (target, detail string) {
	return "postgres connections of " + k.p.schema, fmt.Sprintf("%d sessions terminated (%d in a call), and each opened again within %v", k.first.Sessions, k.first.InCall, killEvery)
}

// End implements realtime.ActiveFault: it stops terminating sessions,
// and closes the pool's idle connections, whose sessions it may have
// ended: the first call on each would fail once more after the fault,
// reading the resources' records back among them. The pool opens new
// ones as they are asked for.
func (k *killing) End(ctx context.Context) realtime.FaultOutcome {
	close(k.stop)
	select {
	case <-k.done:
	case <-ctx.Done():
		return realtime.FaultOutcome{Err: fmt.Errorf("realtime: postgres: the kill of the connections did not stop: %w", ctx.Err())}
	}
	dropIdle(k.p.db)
	out := realtime.FaultOutcome{Detail: fmt.Sprintf("%d sessions terminated in all, %d of them in a call: a statement running or a transaction open", k.total.Sessions, k.total.InCall)}
	if err := errors.Join(k.errs...); err != nil {
		out.Err = fmt.Errorf("realtime: postgres: %w", err)
		out.Detail += "; " + err.Error()
	}
	return out
}
