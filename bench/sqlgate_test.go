package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// BenchmarkSQLGateCommit is sqlgate's Commit of one order row by the
// floor's holder, beside the same insert in a bare transaction on the same
// database (impl=tx). The gate adds one statement to each admitted commit:
// the conditional UPDATE of the floor row, which runs first. SQLite runs in
// WAL mode with synchronous=NORMAL, the usual WAL setting, in which a commit
// does not wait for the disk, so the statements are most of the cost and the
// gate's share is the largest. PostgreSQL runs when LEASEFENCE_PG_URL names
// a server (scripts/postgres.sh), and is skipped otherwise.
func BenchmarkSQLGateCommit(b *testing.B) {
	for _, d := range []struct {
		name string
		open func(b *testing.B) (*sql.DB, string)
	}{
		{"sqlite-wal", openBenchSQLite},
		{"postgres", openBenchPostgres},
	} {
		b.Run("db="+d.name, func(b *testing.B) {
			db, id := d.open(b)
			ctx := context.Background()
			if _, err := db.ExecContext(ctx, `CREATE TABLE bench_orders (`+id+`, item TEXT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			gate, err := sqlgate.New(ctx, db, "orders")
			if err != nil {
				b.Fatal(err)
			}
			t := leasefence.Token{Resource: "orders", Holder: "worker-a", Fence: 1}
			write := func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO bench_orders (item, fence) VALUES ($1, $2)`, "espresso", int64(t.Fence))
				return err
			}
			// The baseline first: benchstat -col /impl compares with it.
			b.Run("impl=tx", func(b *testing.B) {
				for b.Loop() {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := write(ctx, tx); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				reportOpsPerSecond(b)
			})
			b.Run("impl=gate", func(b *testing.B) {
				for b.Loop() {
					if err := gate.Commit(ctx, t, write); err != nil {
						b.Fatal(err)
					}
				}
				reportOpsPerSecond(b)
			})
		})
	}
}

func reportOpsPerSecond(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// openBenchSQLite returns a fresh SQLite database in WAL mode, and the
// definition of an id column numbered in insertion order.
func openBenchSQLite(b *testing.B) (*sql.DB, string) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "bench.db")+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db, "id INTEGER PRIMARY KEY AUTOINCREMENT"
}

// openBenchPostgres returns a handle on a schema of its own, dropped when
// the benchmark ends, on the server LEASEFENCE_PG_URL names.
func openBenchPostgres(b *testing.B) (*sql.DB, string) {
	url := os.Getenv("LEASEFENCE_PG_URL")
	if url == "" {
		b.Skip("LEASEFENCE_PG_URL is not set: PostgreSQL skipped (scripts/postgres.sh start; eval \"$(scripts/postgres.sh env)\")")
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	admin := stdlib.OpenDB(*cfg)
	b.Cleanup(func() { admin.Close() })
	schema := "lf_bench_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			b.Error(err)
		}
	})
	cfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cfg)
	b.Cleanup(func() { db.Close() })
	return db, "id BIGSERIAL PRIMARY KEY"
}
