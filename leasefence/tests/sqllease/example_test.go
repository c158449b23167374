package sqllease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/leasefence/sqllease"
)

// A service whose only shared store is PostgreSQL: each worker takes the
// lease on "deploy-slot" with one call and records a deploy through a gate
// in the same database, which checks the lease in the write's own
// transaction. worker-a's process freezes (its renewals with it) past its
// lease; worker-b takes over; when worker-a wakes, its late write is
// refused, before worker-b has written anything.
//
// It runs on the PostgreSQL at LEASEFENCE_PG_URL, in a schema of its own,
// and on a SQLite file when that is unset: the same statements, the same
// output.
func Example_postgres() {
	ctx := context.Background()
	db, done := openDatabase()
	defer done()
	if err := sqllease.CreateSchema(ctx, db, sqllease.Options{}); err != nil { // once, at deployment
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE deploys (version TEXT NOT NULL, holder TEXT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	gate, err := sqlgate.New(ctx, db, "deploy-slot", sqlgate.WithCurrentLease(sqllease.DefaultTable))
	if err != nil {
		log.Fatal(err)
	}
	deploy := func(t leasefence.Token, version string) error {
		return gate.Commit(ctx, t, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO deploys (version, holder, fence) VALUES ($1, $2, $3)`, version, t.Holder, int64(t.Fence))
			return err
		})
	}

	processA := &process{} // worker-a's process, which will freeze
	a, err := sqllease.Lock(ctx, db, "deploy-slot", sqllease.LockOptions{Holder: "worker-a", TTL: 500 * time.Millisecond,
		Hold: leasefence.HoldOptions{After: processA.after}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker-a holds", a.Token())
	fmt.Println("worker-a:", deploy(a.Token(), "v1"))
	processA.freeze() // ...renewals and all

	b, err := sqllease.Lock(ctx, db, "deploy-slot", sqllease.LockOptions{Holder: "worker-b", TTL: 500 * time.Millisecond}) // waits out worker-a's lease
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	fmt.Println("worker-b holds", b.Token())

	processA.thaw()
	err = deploy(a.Token(), "v2")
	fmt.Println("worker-a, late:", err)
	fmt.Println("refused:", errors.Is(err, sqlgate.ErrLeaseNotLive))
	_, _ = a.Release(ctx) // the lease is already gone

	fmt.Println("worker-b:", deploy(b.Token(), "v3"))
	rows, err := db.QueryContext(ctx, `SELECT version, holder, fence FROM deploys ORDER BY fence, version`)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var version, holder string
		var fence int64
		if err := rows.Scan(&version, &holder, &fence); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("deployed %s by %s@%d\n", version, holder, fence)
	}
	// Output:
	// worker-a holds worker-a@1 on "deploy-slot"
	// worker-a: <nil>
	// worker-b holds worker-b@2 on "deploy-slot"
	// worker-a, late: sqlgate: lease not live at "deploy-slot": worker-a@1 is not the current, live lease in leasefence_leases (refusal #1)
	// refused: true
	// worker-b: <nil>
	// deployed v1 by worker-a@1
	// deployed v3 by worker-b@2
}

// openDatabase opens the PostgreSQL database at LEASEFENCE_PG_URL (pgx's
// database/sql driver), in a schema of its own, or, when that is unset, a
// SQLite file in a directory of its own; done drops either.
func openDatabase() (db *sql.DB, done func()) {
	pg := os.Getenv("LEASEFENCE_PG_URL")
	if pg == "" {
		dir, err := os.MkdirTemp("", "deploys")
		if err != nil {
			log.Fatal(err)
		}
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "deploys.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
		if err != nil {
			log.Fatal(err)
		}
		return db, func() { db.Close(); os.RemoveAll(dir) }
	}
	admin, err := sql.Open("pgx", pg)
	if err != nil {
		log.Fatal(err)
	}
	schema := fmt.Sprintf("deploys_%d", time.Now().UnixNano())
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		log.Fatal(err)
	}
	u, err := url.Parse(pg)
	if err != nil {
		log.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	if db, err = sql.Open("pgx", u.String()); err != nil {
		log.Fatal(err)
	}
	return db, func() {
		db.Close()
		_, _ = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
		admin.Close()
	}
}

// process stands for worker-a's process: while it is frozen, no timer of
// its session fires, as in a process stopped by SIGSTOP or a long pause.
type process struct {
	mu     sync.Mutex
	thawed chan struct{} // nil while running
}

func (p *process) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.thawed = make(chan struct{})
}

func (p *process) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.thawed)
	p.thawed = nil
}

// after is time.After, held up while the process is frozen.
func (p *process) after(d time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	go func() {
		time.Sleep(d)
		p.mu.Lock()
		thawed := p.thawed
		p.mu.Unlock()
		if thawed != nil {
			<-thawed
		}
		c <- time.Now()
	}()
	return c
}
