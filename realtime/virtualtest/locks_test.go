package virtualtest_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

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
