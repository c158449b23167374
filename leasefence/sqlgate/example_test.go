package sqlgate_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// Guarding a database row: a worker holding a lease writes an order row
// through the gate; a worker that stalled past its lease writes late, and
// the database refuses it and logs it; the log survives a restart.
func Example_guardingADatabaseRow() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "shop")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "file:" + filepath.Join(dir, "shop.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"

	// A coordinator and two workers. Time moves only when the example says.
	clock := leasefence.NewManualClock("lab")
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: 10 * time.Second})
	acquire := func(worker string) leasefence.Token {
		client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: worker})
		req, _ := client.BeginAcquire("orders")
		out, _ := coord.Acquire(req)
		lease, _ := client.CompleteAcquire(req, out.Grant)
		return lease.Token
	}

	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		log.Fatal(err)
	}
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

	a := acquire("worker-a")
	fmt.Println("worker-a:", placeOrder(a, "espresso machine"))
	clock.Advance(11 * time.Second) // worker-a stalls past its lease
	b := acquire("worker-b")
	fmt.Println("worker-b:", placeOrder(b, "coffee beans"))
	fmt.Println("worker-a, late:", placeOrder(a, "espresso machine, again"))
	db.Close()

	// The program restarts: the floor and the refusal log are in the database.
	db, err = sql.Open("sqlite", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	gate, err = sqlgate.New(ctx, db, "orders")
	if err != nil {
		log.Fatal(err)
	}
	floor, _ := gate.Floor(ctx)
	fmt.Println("floor after the restart:", floor)
	rejections, _ := gate.Rejections(ctx)
	for _, r := range rejections {
		fmt.Printf("refusal %d: %s@%d refused, floor %s@%d\n", r.Seq, r.Holder, r.Fence, r.FloorHolder, r.FloorFence)
	}
	rows, _ := db.QueryContext(ctx, `SELECT item, fence FROM orders ORDER BY id`)
	defer rows.Close()
	for rows.Next() {
		var item string
		var fence int64
		_ = rows.Scan(&item, &fence)
		fmt.Printf("order: %s (fence %d)\n", item, fence)
	}
	// Output:
	// worker-a: <nil>
	// worker-b: <nil>
	// worker-a, late: leasefence: stale fence at "orders": worker-a@1 refused, floor is worker-b@2
	// floor after the restart: worker-b@2 on "orders"
	// refusal 1: worker-a@1 refused, floor worker-b@2
	// order: espresso machine (fence 1)
	// order: coffee beans (fence 2)
}
