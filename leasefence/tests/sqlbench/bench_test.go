package sqlbench_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// ttl is long enough that no lease of a run expires during it: what is
// measured is the calls.
const ttl = 10 * time.Minute

// database is one fresh database of a backend and how to speak to it.
type database struct {
	db *sql.DB
	// now is the SQL expression of the database's clock in microseconds,
	// the one sqllease and sqlgate use.
	now string
	// param rewrites $n parameters for the dialect.
	param func(string) string
	// serial is the definition of an id column numbered in insertion order.
	serial   string
	postgres bool
}

// backends are the databases the benchmarks run on: SQLite (WAL,
// synchronous=NORMAL, as bench's SQLGateCommit) always, PostgreSQL when
// LEASEFENCE_PG_URL is set (scripts/postgres.sh), skipped otherwise.
var backends = []struct {
	name string
	open func(b *testing.B, tracer pgx.QueryTracer) database
}{
	{"sqlite-wal", openSQLite},
	{"postgres", openPostgres},
}

func openSQLite(b *testing.B, _ pgx.QueryTracer) database {
	db := sqltest.NewSQLite(b, "bench.db").Open(b, sqltest.SQLiteParams+"&_pragma=synchronous(NORMAL)")
	return database{
		db:     db,
		now:    "CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
		param:  func(q string) string { return strings.ReplaceAll(q, "$", "?") },
		serial: "id INTEGER PRIMARY KEY AUTOINCREMENT",
	}
}

// openPostgres opens a schema of the benchmark's own (dropped at its end),
// through pgx's database/sql driver, with tracer on every connection when
// it is not nil.
func openPostgres(b *testing.B, tracer pgx.QueryTracer) database {
	cfg := sqltest.NewPostgres(b).Config.Copy()
	cfg.Tracer = tracer
	db := stdlib.OpenDB(*cfg)
	b.Cleanup(func() { db.Close() })
	return database{
		db:       db,
		now:      "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
		param:    func(q string) string { return q },
		serial:   "id BIGSERIAL PRIMARY KEY",
		postgres: true,
	}
}

// impl is one thing measured: a cycle of it per call of op.
type impl struct {
	name string
	op   func(ctx context.Context) error
}

// byTurns runs every impl once per iteration of b's loop, in turn, so that
// all see the same machine at the same moments, and reports each one's
// median latency (p50-µs-<impl>), the ratio of each of ours to each
// baseline's median (<ours>/<baseline>), and the load average as the round
// ended (load1, Linux only): run with -count N for N rounds.
func byTurns(b *testing.B, ours, baselines []impl) {
	b.Helper()
	all := slices.Concat(baselines, ours)
	lat := make([][]time.Duration, len(all))
	ctx := b.Context()
	for b.Loop() {
		for k, im := range all {
			start := time.Now()
			if err := im.op(ctx); err != nil {
				b.Fatalf("%s: %v", im.name, err)
			}
			lat[k] = append(lat[k], time.Since(start))
		}
	}
	p50 := make(map[string]float64, len(all))
	for k, im := range all {
		p50[im.name] = median(lat[k])
		b.ReportMetric(p50[im.name], "p50-µs-"+im.name)
	}
	for _, o := range ours {
		for _, base := range baselines {
			b.ReportMetric(p50[o.name]/p50[base.name], o.name+"/"+base.name)
		}
	}
	if load, ok := loadAverage(); ok {
		b.ReportMetric(load, "load1")
	}
}

// median is lat's median in microseconds; it sorts lat.
func median(lat []time.Duration) float64 {
	slices.Sort(lat)
	return float64(lat[len(lat)/2].Nanoseconds()) / 1e3
}

// loadAverage is the machine's one-minute load average.
func loadAverage() (float64, bool) {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(raw), " ")
	load, err := strconv.ParseFloat(first, 64)
	return load, err == nil
}

// BenchmarkAcquireRelease is one holder taking a free resource and
// giving it back, by turns:
//
//   - impl=sqllease: BeginAcquire, the coordinator's Acquire (one
//     transaction), CompleteAcquire, Release (one UPDATE);
//   - impl=advisory (PostgreSQL): pg_try_advisory_lock and
//     pg_advisory_unlock on one pinned connection, a lock with no fence, no
//     TTL and no record;
//   - impl=upsert: a lease in a row of sqllease's layout, taken by one
//     INSERT ... ON CONFLICT DO UPDATE that succeeds only if the row's
//     lease is released or expired and returns the raised fence, and freed
//     by one UPDATE: a fence and a TTL on the database's clock, without the
//     request ids, the replay answers and the table-wide fence counter.
//
// Each baseline is two statements, each its own transaction.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, be := range backends {
		b.Run("db="+be.name, func(b *testing.B) {
			d := be.open(b, nil)
			baselines := []impl{upsertCycle(b, d)}
			if d.postgres {
				baselines = append([]impl{advisoryCycle(b, d)}, baselines...)
			}
			byTurns(b, []impl{sqlleaseCycle(b, d)}, baselines)
		})
	}
}

func sqlleaseCycle(b *testing.B, d database) impl {
	coord := newCoordinator(b, d)
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("bench"), Holder: "worker-a"})
	if err != nil {
		b.Fatal(err)
	}
	return impl{"sqllease", func(ctx context.Context) error {
		req, err := client.BeginAcquire("slot")
		if err != nil {
			return err
		}
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			return fmt.Errorf("Acquire = %+v, %v", out, err)
		}
		if _, err := client.CompleteAcquire(req, out.Grant); err != nil {
			return err
		}
		rel, err := coord.Release(ctx, out.Grant.Token)
		if err != nil || !rel.OK {
			return fmt.Errorf("Release = %+v, %v", rel, err)
		}
		return nil
	}}
}

// newCoordinator makes sqllease's tables on d and a coordinator on them.
func newCoordinator(b *testing.B, d database) *sqllease.Coordinator {
	if err := sqllease.CreateSchema(b.Context(), d.db, sqllease.Options{}); err != nil {
		b.Fatal(err)
	}
	coord, err := sqllease.New(d.db, sqllease.Options{TTL: ttl})
	if err != nil {
		b.Fatal(err)
	}
	return coord
}

func advisoryCycle(b *testing.B, d database) impl {
	conn, err := d.db.Conn(b.Context()) // session locks belong to a connection
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return impl{"advisory", func(ctx context.Context) error {
		var ok bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, "slot").Scan(&ok); err != nil || !ok {
			return fmt.Errorf("pg_try_advisory_lock = %v, %v", ok, err)
		}
		if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, "slot").Scan(&ok); err != nil || !ok {
			return fmt.Errorf("pg_advisory_unlock = %v, %v", ok, err)
		}
		return nil
	}}
}

func upsertCycle(b *testing.B, d database) impl {
	if _, err := d.db.ExecContext(b.Context(), `CREATE TABLE bare_leases (
	resource   TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	fence      BIGINT NOT NULL,
	expires_us BIGINT NOT NULL,
	released   SMALLINT NOT NULL
)`); err != nil {
		b.Fatal(err)
	}
	take := d.param(`INSERT INTO bare_leases (resource, holder, fence, expires_us, released) VALUES ($1, $2, 1, ` + d.now + ` + $3, 0)
ON CONFLICT (resource) DO UPDATE SET holder = excluded.holder, fence = bare_leases.fence + 1, expires_us = excluded.expires_us, released = 0
WHERE bare_leases.released = 1 OR bare_leases.expires_us <= ` + d.now + ` RETURNING fence`)
	free := d.param(`UPDATE bare_leases SET released = 1 WHERE resource = $1 AND holder = $2 AND fence = $3 AND released = 0`)
	return impl{"upsert", func(ctx context.Context) error {
		var fence int64
		if err := d.db.QueryRowContext(ctx, take, "slot", "worker-a", ttl.Microseconds()).Scan(&fence); err != nil {
			return fmt.Errorf("upsert: %w", err)
		}
		res, err := d.db.ExecContext(ctx, free, "slot", "worker-a", fence)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("release of fence %d: %d rows, %v", fence, n, err)
		}
		return nil
	}}
}

// BenchmarkGateCommit is a commit of one order row by the holder of a
// live lease, by turns:
//
//   - impl=tx: the insert in a bare transaction (BEGIN, INSERT, COMMIT);
//   - impl=tx+1: the same with one trivial statement more (SELECT 1
//     before the insert), the least a gate that needs a statement of its
//     own in the write's transaction can cost;
//   - impl=gate: sqlgate's Commit, floor only (+ the floor row's lock on
//     PostgreSQL, its conditional UPDATE on SQLite);
//   - impl=gate-lease: sqlgate's Commit WithCurrentLease(sqllease's
//     table) (+ the read of the lease row: in the floor row's statement,
//     FOR SHARE, on PostgreSQL; a SELECT of its own on SQLite).
//
// Both gates guard the same resource with the same token, which is the
// floor's and the lease's: the floor is not raised during the run.
func BenchmarkGateCommit(b *testing.B) {
	for _, be := range backends {
		b.Run("db="+be.name, func(b *testing.B) {
			d := be.open(b, nil)
			c := commits(b, d)
			byTurns(b, []impl{c.gate, c.gateLease}, []impl{c.tx, c.txPlusOne})
		})
	}
}

// gateCommits are the commits BenchmarkGateCommit compares, and the
// write they make.
type gateCommits struct {
	tx, txPlusOne, gate, gateLease impl
	write                          func(ctx context.Context, tx *sql.Tx) error
}

// commits returns the commits BenchmarkGateCommit compares, on d.
func commits(b *testing.B, d database) gateCommits {
	ctx := b.Context()
	if _, err := d.db.ExecContext(ctx, `CREATE TABLE bench_orders (`+d.serial+`, item TEXT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	coord := newCoordinator(b, d)
	t := sqltest.MustAcquire(b, coord, "worker-a", "orders")
	write := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, d.param(`INSERT INTO bench_orders (item, fence) VALUES ($1, $2)`), "espresso", int64(t.Fence))
		return err
	}
	floorOnly, err := sqlgate.New(ctx, d.db, "orders")
	if err != nil {
		b.Fatal(err)
	}
	withLease, err := sqlgate.New(ctx, d.db, "orders", sqlgate.WithCurrentLease(sqllease.DefaultTable))
	if err != nil {
		b.Fatal(err)
	}
	if err := floorOnly.Admit(ctx, t); err != nil { // the floor is the token from the start
		b.Fatal(err)
	}
	one := func(ctx context.Context, tx *sql.Tx) error {
		var n int
		return tx.QueryRowContext(ctx, `SELECT 1`).Scan(&n)
	}
	return gateCommits{
		tx:        impl{"tx", bareTx(d.db, write)},
		txPlusOne: impl{"tx+1", bareTx(d.db, one, write)},
		gate:      impl{"gate", func(ctx context.Context) error { return floorOnly.Commit(ctx, t, write) }},
		gateLease: impl{"gate-lease", func(ctx context.Context) error { return withLease.Commit(ctx, t, write) }},
		write:     write,
	}
}

// BenchmarkGateCommitFloor is what one statement more in the write's
// transaction costs on PostgreSQL, by turns, against the bare transaction
// (impl=tx), from the least to the gate:
//
//   - impl=tx+savepoint: a SAVEPOINT, a round trip that reads nothing;
//   - impl=tx+1: SELECT 1, a statement with no table;
//   - impl=tx+read: a read of the gate's floor row by its key;
//   - impl=tx+lock: the same read FOR UPDATE, the gate's statement sent by
//     hand;
//   - impl=gate: sqlgate's Commit, floor only.
//
// A gate that keeps its floor in the database reads and locks the floor
// row in the write's transaction, so tx+lock is the least it can cost.
func BenchmarkGateCommitFloor(b *testing.B) {
	d := openPostgres(b, nil)
	c := commits(b, d)
	floor := `SELECT holder, fence FROM leasefence_floor WHERE resource = $1`
	read := func(q string) func(ctx context.Context, tx *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			var holder string
			var fence int64
			return tx.QueryRowContext(ctx, q, "orders").Scan(&holder, &fence)
		}
	}
	savepoint := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `SAVEPOINT gate`)
		return err
	}
	byTurns(b, []impl{
		{"tx+savepoint", bareTx(d.db, savepoint, c.write)},
		c.txPlusOne,
		{"tx+read", bareTx(d.db, read(floor), c.write)},
		{"tx+lock", bareTx(d.db, read(floor+` FOR UPDATE`), c.write)},
		c.gate,
	}, []impl{c.tx})
}

// bareTx runs steps in one bare database/sql transaction and commits it.
func bareTx(db *sql.DB, steps ...func(ctx context.Context, tx *sql.Tx) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, step := range steps {
			if err := step(ctx, tx); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	}
}

// BenchmarkGateCommitRaise is a commit that raises the floor (each one
// under a fence above the last: the first write of a new lease) on
// PostgreSQL, by turns:
//
//   - impl=lock+raise: the floor row read FOR UPDATE, then the conditional
//     UPDATE that raises it, then the insert, in one bare transaction (5
//     statements);
//   - impl=gate: sqlgate's Commit, floor only, whose conditional UPDATE
//     checks, raises and locks in one statement (4).
func BenchmarkGateCommitRaise(b *testing.B) {
	d := openPostgres(b, nil)
	ctx := b.Context()
	if _, err := d.db.ExecContext(ctx, `CREATE TABLE bench_orders (`+d.serial+`, item TEXT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	gate, err := sqlgate.New(ctx, d.db, "orders")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sqlgate.New(ctx, d.db, "by-hand"); err != nil {
		b.Fatal(err)
	}
	insert := func(f int64) func(ctx context.Context, tx *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO bench_orders (item, fence) VALUES ($1, $2)`, "espresso", f)
			return err
		}
	}
	var handFence, gateFence int64
	lockRaise := func(ctx context.Context) error {
		handFence++
		lock := func(ctx context.Context, tx *sql.Tx) error {
			var holder string
			var fence int64
			return tx.QueryRowContext(ctx, `SELECT holder, fence FROM leasefence_floor WHERE resource = $1 FOR UPDATE`, "by-hand").Scan(&holder, &fence)
		}
		raise := func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE leasefence_floor SET holder = $2, fence = $3 WHERE resource = $1 AND `+
				`(fence < $3 OR (fence = $3 AND (holder = '' OR holder = $2)))`, "by-hand", "worker-a", handFence)
			return err
		}
		return bareTx(d.db, lock, raise, insert(handFence))(ctx)
	}
	commit := func(ctx context.Context) error {
		gateFence++
		tok := leasefence.Token{Resource: "orders", Holder: "worker-a", Fence: leasefence.Fence(gateFence)}
		return gate.Commit(ctx, tok, insert(gateFence))
	}
	byTurns(b, []impl{{"gate", commit}}, []impl{{"lock+raise", lockRaise}})
}

// BenchmarkPostgresCalls times every statement of each cycle above, call
// by call, through a pgx tracer on the connection (the client's wait for
// each answer: the round trip and the server's work). It reports the
// statements per cycle of each impl (statements-<impl>) and logs each
// statement's median. Run it with -benchtime 1000x; the tracer's own cost
// is in these figures, so BenchmarkAcquireRelease and
// BenchmarkGateCommit, untraced, are the ones to compare.
func BenchmarkPostgresCalls(b *testing.B) {
	tr := &callTracer{}
	d := openPostgres(b, tr)
	c := commits(b, d)
	all := []impl{advisoryCycle(b, d), upsertCycle(b, d), sqlleaseCycle(b, d), c.tx, c.txPlusOne, c.gate, c.gateLease}
	calls := make([]map[string][]time.Duration, len(all))
	counts := make([]int, len(all))
	ctx := b.Context()
	for b.Loop() {
		for k, im := range all {
			tr.calls = tr.calls[:0]
			if err := im.op(ctx); err != nil {
				b.Fatalf("%s: %v", im.name, err)
			}
			if calls[k] == nil {
				calls[k] = map[string][]time.Duration{}
			}
			for _, c := range tr.calls {
				calls[k][c.sql] = append(calls[k][c.sql], c.d)
			}
			counts[k] += len(tr.calls)
		}
	}
	for k, im := range all {
		b.ReportMetric(float64(counts[k])/float64(b.N), "statements-"+im.name)
		for _, q := range slices.Sorted(func(yield func(string) bool) {
			for q := range calls[k] {
				if !yield(q) {
					return
				}
			}
		}) {
			b.Logf("%s: %d calls, p50 %.1f µs: %s", im.name, len(calls[k][q]), median(calls[k][q]), oneLine(q))
		}
	}
}

// callTracer records each statement's text and how long the client waited
// for its answer. The benchmark runs one statement at a time.
type callTracer struct {
	calls []call
	start time.Time
	sql   string
}

type call struct {
	sql string
	d   time.Duration
}

func (c *callTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.start, c.sql = time.Now(), data.SQL
	return ctx
}

func (c *callTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {
	c.calls = append(c.calls, call{c.sql, time.Since(c.start)})
}

// oneLine is q on one line, shortened to 110 characters.
func oneLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 110 {
		q = q[:107] + "..."
	}
	return q
}
