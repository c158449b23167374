// Package bench measures the lab against baselines: the fence gate against a
// mutex-guarded call, the coordinator against a map behind a mutex, the
// simulator's throughput as agents and resources grow, what tracing costs a
// run, one dashboard frame, and the SQL gate against a bare transaction.
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
