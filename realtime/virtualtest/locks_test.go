package virtualtest_test

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/realtime"
)

// sleepyLock is a lock in memory whose every call first waits wait on the
// clock, as a call over a network does: in a bubble, a virtual wait. With
// mutexAcross, the wait is made holding one sync.Mutex of the lock's, as a
// client that serialises its calls with one does.
type sleepyLock struct {
	wait        time.Duration
	mutexAcross bool
	panicIn     string // the call that panics, after its wait ("Release")

	across sync.Mutex // held across the wait, with mutexAcross
	mu     sync.Mutex // guards held, never across a wait
	held   map[string]time.Time
}

func (l *sleepyLock) call(name string) {
	if l.mutexAcross {
		l.across.Lock()
		defer l.across.Unlock()
	}
	time.Sleep(l.wait)
	if name == l.panicIn {
		panic("sleepy: " + name + " of a lease")
	}
}

func (l *sleepyLock) Acquire(_ context.Context, resource, _ string, ttl time.Duration) (realtime.Lease, error) {
	l.call("Acquire")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(map[string]time.Time)
	}
	if time.Now().Before(l.held[resource]) {
		return nil, fmt.Errorf("%s: %w", resource, realtime.ErrHeld)
	}
	d := time.Now().Add(ttl)
	l.held[resource] = d
	return &sleepyLease{l: l, resource: resource, deadline: d, ttl: ttl}, nil
}

type sleepyLease struct {
	l        *sleepyLock
	resource string
	ttl      time.Duration
	mu       sync.Mutex
	deadline time.Time
}

func (s *sleepyLease) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

func (*sleepyLease) Fence() (uint64, bool) { return 0, false }

func (s *sleepyLease) Renew(context.Context) error {
	s.l.call("Renew")
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.l.held[s.resource].Equal(s.deadline) || !time.Now().Before(s.deadline) {
		return realtime.ErrHeld
	}
	s.deadline = time.Now().Add(s.ttl)
	s.l.held[s.resource] = s.deadline
	return nil
}

func (s *sleepyLease) Release(context.Context) error {
	s.l.call("Release")
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.l.held[s.resource].Equal(s.deadline) {
		delete(s.l.held, s.resource)
	}
	return nil
}

// socketLock dials a real address at each Acquire and waits for an
// answer that never comes: a real socket in a bubble.
type socketLock struct{ addr string }

func (l socketLock) Acquire(ctx context.Context, _, _ string, _ time.Duration) (realtime.Lease, error) {
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	return nil, err
}

// blockedLock's Acquire waits on a channel nothing sends on, heeding no
// context: blocked durably, for good.
type blockedLock struct{}

func (blockedLock) Acquire(context.Context, string, string, time.Duration) (realtime.Lease, error) {
	<-make(chan struct{})
	return nil, nil
}

// setnxLock is the classic SET NX PX lock on Redis, built on a go-redis
// client as a user builds one. Correct, it releases by a script that
// deletes the key only while it holds the lease's own value; with delAny,
// Release is a bare DEL of whoever's key is there: the bug a swarm must
// catch (a late release frees a lock another agent holds).
type setnxLock struct {
	rdb    *redis.Client
	delAny bool
	seq    atomic.Uint64 // each lease's value, unique in the run
}

var (
	setnxRenew   = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
	setnxRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
)

func (l *setnxLock) Acquire(ctx context.Context, resource, _ string, ttl time.Duration) (realtime.Lease, error) {
	sent := time.Now()
	value := fmt.Sprint(l.seq.Add(1))
	ok, err := l.rdb.SetNX(ctx, resource, value, ttl).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("setnx: %s: %w", resource, realtime.ErrHeld)
	}
	return &setnxLease{l: l, key: resource, value: value, ttl: ttl, deadline: sent.Add(ttl)}, nil
}

type setnxLease struct {
	l          *setnxLock
	key, value string
	ttl        time.Duration
	mu         sync.Mutex // guards deadline, never across a call
	deadline   time.Time
}

func (s *setnxLease) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

func (*setnxLease) Fence() (uint64, bool) { return 0, false }

func (s *setnxLease) Renew(ctx context.Context) error {
	sent := time.Now()
	if n, err := setnxRenew.Run(ctx, s.l.rdb, []string{s.key}, s.value, s.ttl.Milliseconds()).Int(); err != nil || n == 0 {
		return cmp.Or(err, realtime.ErrNotHeld)
	}
	s.mu.Lock()
	s.deadline = sent.Add(s.ttl)
	s.mu.Unlock()
	return nil
}

func (s *setnxLease) Release(ctx context.Context) error {
	if s.l.delAny {
		return s.l.rdb.Del(ctx, s.key).Err()
	}
	if n, err := setnxRelease.Run(ctx, s.l.rdb, []string{s.key}, s.value).Int(); err != nil || n == 0 {
		return cmp.Or(err, realtime.ErrNotHeld)
	}
	return nil
}
