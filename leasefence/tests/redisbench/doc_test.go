// Package redisbench_test measures redislease against what a team on Redis
// would run instead, the real libraries, in one run and by turns:
// acquire + release against go-redsync/redsync (one instance) and
// bsm/redislock, and a gated commit against a bare SET and against the one
// round-trip form a gate could take (a script that judges the fence and
// writes). The contenders are dependencies of this test module only, so
// the library's own modules import nothing more for them.
//
//	scripts/redis.sh start && eval "$(scripts/redis.sh env)"
//	cd leasefence/tests && go test -run '^$' -bench . -benchtime 3000x -count 5 ./redisbench
//
// Each benchmark reports every contender's median (p50-µs-<impl>) and the
// ratio of ours to each (x-<impl>), and the Redis it ran on
// (appendfsync-always: 1 when every write waits for the disk).
package redisbench_test
