package labtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasefence/lab/labtest"
)

// memLock is a user's own lock in memory, with the mistakes the tests ask
// for as switches. Without them it is correct: a lease is keyed by a value
// of its own, and the holder's deadline is counted from before the call,
// less a margin, so it always ends before the server's expiry.
type memLock struct {
	// releaseByHolder: Release deletes whatever lease its holder's name
	// has on the resource, not the lease it was called on.
	releaseByHolder bool
	// replyDeadline: the holder takes its deadline from the reply, the
	// expiry the server stamped on the server's clock, instead of
	// counting the TTL on its own clock from the request's send. The
	// server's clock runs serverAhead ahead of the holder's, so the
	// holder believes it holds the lock that much longer than the lock
	// keeps it.
	replyDeadline bool
	serverAhead   time.Duration
	// noFence: the leases have no fence.
	noFence bool
	// renewLost: Renew answers nil for a lease whose key is gone or
	// another's, and takes the key back (SET with no check of its value).
	renewLost bool
	// releaseNil: Release answers nil for a lease no longer held.
	releaseNil bool
	// releaseDel: Release deletes the key whoever holds it (DEL with no
	// check of its value), and answers nil.
	releaseDel bool
	// neverExpires: a lease lasts until it is released (a session lock,
	// as a PostgreSQL advisory lock), its Deadline far ahead.
	neverExpires bool
	// reentrant: Acquire by the holder that has the key grants it a new
	// lease, taking the request for a retry of its own: when the reply to
	// an acquire was lost and the holder asks again, the lease it never
	// heard of and the new one are two grants at once.
	reentrant bool
	// plainLost: Renew and Release of a lease no longer held return an
	// error of the lock's own that does not match ErrNotHeld.
	plainLost bool
	// heldWait: Acquire of a held key waits this long before it answers
	// ErrHeld, whatever its context says (a retry loop of its own that
	// ignores the context).
	heldWait time.Duration

	mu    sync.Mutex
	keys  map[string]*memEntry
	fence uint64
}

type memEntry struct {
	holder, value string
	expires       time.Time
}

type memLease struct {
	l                       *memLock
	resource, holder, value string
	fence                   uint64
	ttl                     time.Duration
	mu                      sync.Mutex
	deadline                time.Time
}

func newMemLock() *memLock { return &memLock{keys: make(map[string]*memEntry)} }

const margin = 50 * time.Millisecond

// serverNow is the time on the lock server's clock.
func (l *memLock) serverNow() time.Time { return time.Now().Add(l.serverAhead) }

func (l *memLock) Acquire(_ context.Context, resource, holder string, ttl time.Duration) (labtest.Lease, error) {
	sent := time.Now()
	l.mu.Lock()
	now := l.serverNow()
	if e, ok := l.keys[resource]; ok && now.Before(e.expires) && (!l.reentrant || e.holder != holder) {
		l.mu.Unlock()
		time.Sleep(l.heldWait)
		return nil, fmt.Errorf("%s holds %s: %w", e.holder, resource, labtest.ErrHeld)
	}
	l.fence++
	e := &memEntry{holder: holder, value: fmt.Sprintf("%s/%d", holder, l.fence), expires: now.Add(ttl)}
	if l.neverExpires {
		e.expires = now.Add(forever)
	}
	l.keys[resource] = e
	le := &memLease{l: l, resource: resource, holder: holder, value: e.value, fence: l.fence, ttl: ttl}
	l.mu.Unlock()
	le.deadline = sent.Add(ttl - margin)
	if l.replyDeadline || l.neverExpires {
		le.deadline = e.expires
	}
	return le, nil
}

// forever is how long a lease of a lock that never expires lasts.
const forever = 24 * time.Hour

func (le *memLease) Deadline() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.deadline
}

func (le *memLease) Fence() (uint64, bool) { return le.fence, !le.l.noFence }

// errLost is what Renew and Release return for a lease no longer held, as
// the lease contract asks.
var errLost = fmt.Errorf("memlock: lock lost: %w", labtest.ErrNotHeld)

// errPlainLost is what a lock that breaks the contract returns instead.
var errPlainLost = errors.New("memlock: lock lost")

// lost is the error of Renew and Release of a lease no longer held.
func (l *memLock) lost() error {
	if l.plainLost {
		return errPlainLost
	}
	return errLost
}

func (le *memLease) Renew(context.Context) error {
	sent := time.Now()
	l := le.l
	l.mu.Lock()
	e, ok := l.keys[le.resource]
	now := l.serverNow()
	if (!ok || e.value != le.value || !now.Before(e.expires)) && l.renewLost {
		e = &memEntry{holder: le.holder, value: le.value}
		l.keys[le.resource] = e
	} else if !ok || e.value != le.value || !now.Before(e.expires) {
		l.mu.Unlock()
		return l.lost()
	}
	e.expires = now.Add(le.ttl)
	if l.neverExpires {
		e.expires = now.Add(forever)
	}
	l.mu.Unlock()
	d := sent.Add(le.ttl - margin)
	if l.replyDeadline || l.neverExpires {
		d = e.expires
	}
	le.mu.Lock()
	le.deadline = d
	le.mu.Unlock()
	return nil
}

func (le *memLease) Release(context.Context) error {
	l := le.l
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.keys[le.resource]
	switch {
	case l.releaseDel:
		delete(l.keys, le.resource)
		return nil
	case !ok:
	case l.releaseByHolder && e.holder == le.holder, e.value == le.value && l.serverNow().Before(e.expires):
		delete(l.keys, le.resource)
		return nil
	}
	if l.releaseNil {
		return nil
	}
	return l.lost()
}
