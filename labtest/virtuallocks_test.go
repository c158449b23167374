package labtest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/labtest"
)

// setnx is a user's SET NX PX lock on Redis, with the mistakes the tests
// ask for as switches. Without them it is correct: the key holds a value
// of the lease's own, renewing and releasing are scripts that act only
// while it does, and the holder's deadline is counted from before the
// request.
type setnx struct {
	rdb *redis.Client
	// releaseDel: Release deletes the key whoever holds it (DEL with no
	// check of its value), and answers nil.
	releaseDel bool
	// panicIn names a call that panics: "Renew", or a call and a
	// resource ("Acquire labtest-probe").
	panicIn string
	// blockIn names a call that blocks for good, heeding no context, but
	// on the probe's resource.
	blockIn string
}

// at is the start of call on resource: a panic or a block, if asked.
func (l *setnx) at(call, resource string) {
	if l.panicIn == call || l.panicIn == call+" "+resource {
		panic("setnx: " + call + " of " + resource)
	}
	if l.blockIn == call && resource != labtest.ProbeResource {
		<-make(chan struct{})
	}
}

var (
	setnxExtend  = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
	setnxRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
)

var errSetnxLost = fmt.Errorf("setnx: lock lost: %w", labtest.ErrNotHeld)

func (l *setnx) Acquire(ctx context.Context, resource, _ string, ttl time.Duration) (labtest.Lease, error) {
	l.at("Acquire", resource)
	sent := time.Now()
	value := rand.Text()
	ok, err := l.rdb.SetNX(ctx, resource, value, ttl).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("setnx: %s: %w", resource, labtest.ErrHeld)
	}
	return &setnxLease{l: l, key: resource, value: value, ttl: ttl, deadline: sent.Add(ttl)}, nil
}

type setnxLease struct {
	l          *setnx
	key, value string
	ttl        time.Duration
	deadline   time.Time
}

func (le *setnxLease) Deadline() time.Time { return le.deadline }

func (*setnxLease) Fence() (uint64, bool) { return 0, false }

func (le *setnxLease) Renew(ctx context.Context) error {
	le.l.at("Renew", le.key)
	sent := time.Now()
	n, err := setnxExtend.Run(ctx, le.l.rdb, []string{le.key}, le.value, le.ttl.Milliseconds()).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return errSetnxLost
	}
	le.deadline = sent.Add(le.ttl)
	return nil
}

func (le *setnxLease) Release(ctx context.Context) error {
	le.l.at("Release", le.key)
	if le.l.releaseDel {
		return le.l.rdb.Del(ctx, le.key).Err()
	}
	n, err := setnxRelease.Run(ctx, le.l.rdb, []string{le.key}, le.value).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return errSetnxLost
	}
	return nil
}
