// Package sqlbench_test measures sqllease and sqlgate on PostgreSQL and
// SQLite against the bare SQL a team would write instead, in one run and
// by turns (each iteration runs every implementation once, in turn, so
// that all see the same machine at the same moments):
//
//   - AcquireRelease: a lease taken and given back through sqllease,
//     against a bare pg_try_advisory_lock / pg_advisory_unlock pair
//     (PostgreSQL) and against a bare INSERT ... ON CONFLICT upsert of a
//     row of sqllease's layout and the UPDATE that frees it;
//   - GateCommit: an insert through sqlgate, floor only and
//     WithCurrentLease, against the same insert in a bare transaction,
//     and in one with a trivial statement more (SELECT 1): the least a
//     gate with a statement of its own can cost;
//   - GateCommitFloor (PostgreSQL): the bare transaction with one statement
//     more, from a SAVEPOINT to the floor row's read FOR UPDATE, beside the
//     gate: what each step towards the gate's own statement costs;
//   - GateCommitRaise (PostgreSQL): a commit that raises the floor, through
//     sqlgate against the lock and the raise sent by hand;
//   - PostgresCalls: every statement of those cycles, timed call by call
//     through a pgx tracer, and counted.
//
// On a throwaway server:
//
//	scripts/postgres.sh start && eval "$(scripts/postgres.sh env)"
//	cd leasefence/tests && go test -run '^$' -bench . -benchtime 1000x -count 8 ./sqlbench
//
// Without LEASEFENCE_PG_URL the PostgreSQL cases skip, saying so, and
// SQLite runs alone. Each -count is one round: it reports every
// implementation's median (p50-µs-<impl>), the ratio of ours to each
// baseline (<ours>/<baseline>) and the load average as it ended (load1).
// The figures and what explains them are in bench/README.md.
package sqlbench_test
