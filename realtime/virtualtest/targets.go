package virtualtest

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/redisbackend"
	"github.com/leasefence/lab/realtime/redislocks"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// Memory is the lab's own locks, naive and fenced, on the in-memory
// backend and store: lab run --backend memory.
func Memory() Target {
	return Target{Name: "memory", Open: func(*testing.T, spec.Scenario) (realtime.Options, error) {
		return realtime.Options{Modes: []history.Mode{history.Naive, history.Fenced}}, nil
	}}
}

// addr is what a client of a miniredis names: an IP literal, so that
// go-redis looks no name up; its Dialer reaches the server in memory.
const addr = "127.0.0.1:6379"

// Miniredis starts an in-memory Redis whose TTLs follow the bubble's
// clock, stopped with t.Cleanup.
func Miniredis(t *testing.T) *miniredis.Miniredis {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if c, ok := counting.Load(t); ok {
		c.(*Commands).count(m)
	}
	t.Cleanup(m.Close)
	return m
}

// Dialer is go-redis's Dialer to m, over an in-memory connection.
func Dialer(m *miniredis.Miniredis) func(context.Context, string, string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) { return m.Dial() }
}

// Client is a client of m, closed with t.Cleanup; bounded: each call is
// bounded by its context's deadline too (go-redis's
// ContextTimeoutEnabled).
func Client(t *testing.T, m *miniredis.Miniredis, bounded bool) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Dialer: Dialer(m), ContextTimeoutEnabled: bounded})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Redis is the lab's own locks on Redis, naive (the classic SET NX PX
// lock) and fenced (redislease), on one miniredis, with the in-memory
// store: lab run --backend redis --redis-url, the server in memory. It
// cannot restart the server (a given URL's, on the real backend too).
func Redis() Target {
	return Target{Name: "redis", Plays: func(sc spec.Scenario) error {
		if len(sc.Restarts) > 0 {
			return fmt.Errorf("%w: the redis backend restarts only a redis-server it started", ErrUnplayable)
		}
		return nil
	}, Open: func(t *testing.T, sc spec.Scenario) (realtime.Options, error) {
		m := Miniredis(t)
		b, err := redisbackend.NewRedis(t.Context(), redisbackend.RedisOptions{URL: "redis://" + addr, Dialer: Dialer(m)})
		if err != nil {
			return realtime.Options{}, err
		}
		t.Cleanup(func() { b.Close() })
		return realtime.Options{Modes: []history.Mode{history.Naive, history.Fenced}, Backend: b}, nil
	}}
}

// Contender is library contender name of realtime/redislocks (redsync,
// redislock, redlock) on miniredis servers of its own, one per server it
// runs on, beside the in-memory backend as lab run --contenders runs it.
// A restart restarts redlock's first server (its connections dropped;
// its data lost unless the restart persists), as on redis-servers.
func Contender(name string) Target {
	return Target{Name: name, Plays: func(sc spec.Scenario) error {
		if err := registry.CanPlayAll(sc, registry.Must(registry.Contenders, name)); err != nil {
			return fmt.Errorf("%w: %w", ErrUnplayable, err)
		}
		return nil
	}, Open: func(t *testing.T, sc spec.Scenario) (realtime.Options, error) {
		servers := 1
		if name == registry.Redlock {
			servers = registry.RedlockServers
		}
		ms := make([]*miniredis.Miniredis, servers)
		rdbs := make([]*redis.Client, len(ms))
		for i := range ms {
			ms[i] = Miniredis(t)
			rdbs[i] = Client(t, ms[i], len(ms) > 1)
		}
		c, err := redislocks.OnClients(name, rdbs)
		if err != nil {
			return realtime.Options{}, err
		}
		if len(ms) > 1 {
			c.OnRestart = func(_ context.Context, persist bool) error {
				ms[0].Close() // the next dial starts it again
				if !persist {
					ms[0].FlushAll()
				}
				return nil
			}
			c.RestartTarget = name + "'s server redis-1"
		}
		mode := history.Mode(name)
		return realtime.Options{Modes: []history.Mode{mode}, Contenders: map[history.Mode]*realtime.Contender{mode: c}}, nil
	}}
}

// Lock is a lock built on a client of a miniredis of its own, inside the
// bubble, run alone as mode name with info's fence and discipline, as
// labtest runs a user's lock. Its runs may run at once (a swarm's). It
// cannot play the faults of the lab's coordinator, which the lock does not
// run on: restarts and the gate push.
func Lock(name string, info history.Contender, newLock func(rdb *redis.Client) realtime.Lock) Target {
	info.Name = history.Mode(name)
	return Target{Name: name, Plays: func(sc spec.Scenario) error {
		for _, f := range []spec.Fault{spec.FaultRestart, spec.FaultPush} {
			if sc.Has(f) {
				return fmt.Errorf("%w: a lock of its own has no lab coordinator to play %s on", ErrUnplayable, f)
			}
		}
		return nil
	}, Open: func(t *testing.T, sc spec.Scenario) (realtime.Options, error) {
		rdb := Client(t, Miniredis(t), false)
		c := &realtime.Contender{Info: info, New: func(context.Context, history.Mode) (realtime.Lock, error) { return newLock(rdb), nil }}
		return realtime.Options{Modes: []history.Mode{info.Name}, Backend: c}, nil
	}}
}
