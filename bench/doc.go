// Package bench measures the lab against baselines: the fence gate against a
// mutex-guarded call, the coordinator against a map behind a mutex, the
// simulator's throughput as agents and resources grow and against a bare
// event loop of the same crowd (its ceiling), what tracing costs a run, one
// dashboard frame, the SQL gate against a bare transaction, etcdlease
// against etcd's concurrency.Mutex and a bare keep-alive, and the Redis
// locks in virtual time against the same scenario on a real Redis. (redislease
// against redsync and redislock is in leasefence/tests/redisbench, whose
// module alone depends on them; sqllease and sqlgate against bare SQL on
// PostgreSQL and SQLite, by turns, in leasefence/tests/sqlbench, whose
// module already requires them.)
//
// It holds no code to import: the benchmarks live in its test files and use
// only the public API of the packages they measure, so they show what a
// caller pays. Each benchmark names its implementation as a key=value part
// of its name (impl=mutex, impl=gate, trace=off, ...), the baseline first,
// so that
//
//	benchstat -filter .name:GateCommit -col /impl new.txt
//
// prints a measurement beside its baseline with the difference between
// them.
// README.md says how to run the suite, what it measured on a 2-core
// machine, and which targets are met.
package bench
