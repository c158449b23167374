package redisbackend

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
)

// redisLock is the naive mode on Redis: the classic single-instance lock
// most services run (redsync on one server, bsm/redislock without its
// fencing counter). A grant is SET key value NX PX ttl, the value the
// holder's own; renewing and releasing are scripts that PEXPIRE or DEL the
// key only while it still holds that value. The holder reckons its
// deadline from the reply (the naive agent's rule, in package agent): the
// lock has no fence, and nothing stands between a holder whose lock
// expired and the data.
//
// The history needs a name for each lease generation, so the same MULTI
// that sets the key increments a generation counter beside it, and the
// grant's Fence is that number. It is the lab's bookkeeping: the naive
// agent writes with no gate, and the lock never looks at it. Since the
// counter is incremented in the same transaction as the grant, generations
// are numbered in the order Redis granted them; a restart that loses the
// data loses the counter too, and generations start over, as fences do.
type redisLock struct {
	rdb   func() *redis.Client // the client in use, new after a restart
	tag   string               // "{<mode prefix>}"
	ttl   time.Duration
	clock leasefence.Clock

	mu     sync.Mutex
	values map[leasefence.Token]string // each lease's value, as a lock client keeps it
}

func newRedisLock(rdb func() *redis.Client, prefix string, ttl time.Duration, clock leasefence.Clock) *redisLock {
	return &redisLock{rdb: rdb, tag: "{" + prefix + "}", ttl: ttl, clock: clock, values: make(map[leasefence.Token]string)}
}

func (l *redisLock) key(resource string) string { return l.tag + "lock:" + resource }

// The scripts every Redis lock library ships: act only while the key
// still holds the holder's value.
var (
	lockExtend  = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
	lockRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
)

// Acquire implements leasefence.Service: SET NX PX, with the generation
// counter's increment, and what holds the key if the SET failed. A retried
// request finds its own value in the key and is told the holder holds it
// already, as the classic lock tells it: the lock cannot answer a retry
// with the grant it made.
func (l *redisLock) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	if err := leasefence.ValidateAcquire(req); err != nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("acquire: %w", err)
	}
	key, value := l.key(req.Resource), req.Holder+"/"+req.RequestID
	var set *redis.BoolCmd
	var gen *redis.IntCmd
	var get *redis.StringCmd
	var left *redis.DurationCmd
	_, err := l.rdb().TxPipelined(ctx, func(p redis.Pipeliner) error {
		set = p.SetNX(ctx, key, value, l.ttl)
		gen = p.Incr(ctx, l.tag+"lock-generation")
		get = p.Get(ctx, key)
		left = p.PTTL(ctx, key)
		return nil
	})
	if err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	if !set.Val() {
		holder, _, _ := strings.Cut(get.Val(), "/")
		reason := leasefence.ReasonHeld
		if holder == req.Holder {
			reason = leasefence.ReasonAlreadyHeld
		}
		return leasefence.AcquireOutcome{Reason: reason, HeldBy: holder, RetryAfter: max(left.Val(), time.Millisecond)}, nil
	}
	now, err := l.clock.Now()
	if err != nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("realtime: redis lock clock: %w", err)
	}
	t := leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: leasefence.Fence(gen.Val())}
	l.mu.Lock()
	l.values[t] = value
	l.mu.Unlock()
	return leasefence.AcquireOutcome{OK: true, Grant: leasefence.Grant{
		RequestID: req.RequestID, Token: t, TTL: l.ttl, CoordinatorExpiresAt: now.Add(l.ttl),
	}}, nil
}

func (l *redisLock) value(t leasefence.Token) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.values[t]
	return v, ok
}

// Renew implements leasefence.Service: PEXPIRE while the key holds the
// lease's value. The lock cannot say why it does not: it says expired.
func (l *redisLock) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	v, ok := l.value(req.Token)
	if !ok {
		return leasefence.RenewOutcome{Reason: leasefence.ReasonUnknown}, nil
	}
	n, err := lockExtend.Run(ctx, l.rdb(), []string{l.key(req.Token.Resource)}, v, l.ttl.Milliseconds()).Int()
	if err != nil || n == 0 {
		return leasefence.RenewOutcome{Reason: leasefence.ReasonExpired}, err
	}
	now, err := l.clock.Now()
	if err != nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("realtime: redis lock clock: %w", err)
	}
	return leasefence.RenewOutcome{OK: true, Grant: leasefence.Grant{
		RequestID: req.RequestID, Token: req.Token, TTL: l.ttl, CoordinatorExpiresAt: now.Add(l.ttl),
	}}, nil
}

// Release implements leasefence.Service: DEL while the key holds the
// lease's value.
func (l *redisLock) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	v, ok := l.value(t)
	if !ok {
		return leasefence.ReleaseOutcome{Reason: leasefence.ReasonUnknown}, nil
	}
	n, err := lockRelease.Run(ctx, l.rdb(), []string{l.key(t.Resource)}, v).Int()
	if err != nil {
		return leasefence.ReleaseOutcome{}, err
	}
	l.mu.Lock()
	delete(l.values, t)
	l.mu.Unlock()
	if n == 0 {
		return leasefence.ReleaseOutcome{Reason: leasefence.ReasonExpired}, nil
	}
	return leasefence.ReleaseOutcome{OK: true}, nil
}
