package sqlgate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// The whole program a worker runs, and what a stall does to it: each
// worker holds the lease on "orders" with Hold and writes an order row
// through the gate in the database. worker-a checks its session, then its
// process freezes before the write (a GC pause, SIGSTOP, a VM freeze: its
// renewals stop with it; a goroutine of its own that stalls would not do
// this, the session renews in another one). Its lease runs out, worker-b
// takes over and writes; when worker-a wakes, its late write is refused by
// the database, not by the session it checked.
func Example_holdAndAStalledWorker() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "shop")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, fence BIGINT)`); err != nil {
		log.Fatal(err)
	}
	gate, err := sqlgate.New(ctx, db, "orders") // creates the floor and log tables
	if err != nil {
		log.Fatal(err)
	}
	placeOrder := func(t leasefence.Token, item string) error {
		return gate.Commit(ctx, t, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (item, fence) VALUES (?, ?)`, item, int64(t.Fence))
			return err
		})
	}

	// The coordinator, in this process for the example; etcdlease.New for
	// workers in processes of their own.
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("coordinator"), TTL: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	svc := leasefence.Local(coord)
	hold := func(svc leasefence.Service, worker string) *leasefence.Session {
		client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(worker)), Holder: worker})
		if err != nil {
			log.Fatal(err)
		}
		session, err := leasefence.Hold(ctx, svc, client, "orders", leasefence.HoldOptions{}) // waits while another holds it
		if err != nil {
			log.Fatal(err)
		}
		return session
	}

	processA := &freezable{Service: svc} // worker-a's process, which will freeze
	a := hold(processA, "worker-a")
	fmt.Println("worker-a holds", a.Token())
	fmt.Println("worker-a:", placeOrder(a.Token(), "espresso machine"))
	select {
	case <-a.Lost():
		log.Fatal(a.Err()) // stop starting work
	default:
		fmt.Println("worker-a: still held, writing again")
	}
	processA.freeze() // ...and stalls right there, renewals and all

	b := hold(svc, "worker-b") // granted once worker-a's lease has run out
	defer b.Release(ctx)
	fmt.Println("worker-b holds", b.Token())
	fmt.Println("worker-b:", placeOrder(b.Token(), "coffee beans"))

	processA.thaw()
	err = placeOrder(a.Token(), "espresso machine, again")
	fmt.Println("worker-a, late:", err)
	fmt.Println("refused:", errors.Is(err, leasefence.ErrStaleFence))
	<-a.Lost()
	fmt.Println("worker-a's session lost:", errors.Is(a.Err(), leasefence.ErrLeaseLost))
	_, _ = a.Release(ctx) // stops its renewing; the lease is already gone

	rows, err := db.QueryContext(ctx, `SELECT item, fence FROM orders ORDER BY id`)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var item string
		var fence int64
		if err := rows.Scan(&item, &fence); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("order: %s (fence %d)\n", item, fence)
	}
	// Output:
	// worker-a holds worker-a@1 on "orders"
	// worker-a: <nil>
	// worker-a: still held, writing again
	// worker-b holds worker-b@2 on "orders"
	// worker-b: <nil>
	// worker-a, late: leasefence: stale fence at "orders": worker-a@1 refused, floor is worker-b@2
	// refused: true
	// worker-a's session lost: true
	// order: espresso machine (fence 1)
	// order: coffee beans (fence 2)
}

// freezable stands for a process that freezes: while frozen, its calls to
// the coordinator wait, as a stopped process sends nothing.
type freezable struct {
	leasefence.Service

	mu     sync.Mutex
	thawed chan struct{} // nil while running
}

func (f *freezable) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.thawed = make(chan struct{})
}

func (f *freezable) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.thawed)
	f.thawed = nil
}

func (f *freezable) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	f.mu.Lock()
	thawed := f.thawed
	f.mu.Unlock()
	if thawed != nil {
		select {
		case <-thawed:
		case <-ctx.Done():
			return leasefence.RenewOutcome{}, ctx.Err()
		}
	}
	return f.Service.Renew(ctx, req)
}
