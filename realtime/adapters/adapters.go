// Package adapters links every adapter of the real-time runner, so that
// each registers itself with the registry: the backends and stores
// (etcdbackend, redisbackend, pgbackend, sqlitestore, httpstore) and the library
// contenders (etcdmutex, redislocks, zklock, pgadvisory). A program that runs whatever the
// registry names imports it for its side effects:
//
//	import _ "github.com/leasefence/lab/realtime/adapters"
//
// A program that links only some adapters gets a clear refusal for the
// others: realtime.Config.Check names the backend or resource whose
// adapter is missing (realtime.ErrNotLinked).
package adapters

import (
	_ "github.com/leasefence/lab/realtime/etcdbackend"  // backend and store etcd
	_ "github.com/leasefence/lab/realtime/etcdmutex"    // contenders etcd-mutex, etcd-mutex-fenced
	_ "github.com/leasefence/lab/realtime/httpstore"    // store http
	_ "github.com/leasefence/lab/realtime/pgadvisory"   // contender pg-advisory
	_ "github.com/leasefence/lab/realtime/pgbackend"    // backend and store postgres
	_ "github.com/leasefence/lab/realtime/redisbackend" // backend and store redis
	_ "github.com/leasefence/lab/realtime/redislocks"   // contenders redsync, redislock
	_ "github.com/leasefence/lab/realtime/sqlitestore"  // store sqlite
	_ "github.com/leasefence/lab/realtime/zklock"       // contenders zookeeper, zookeeper-fenced
)
