// Package setnxlock is a lock on Redis as many services write it: SET NX
// PX with a value of the holder's own, extended and released by scripts
// that act only while the key still holds that value. Its test puts it
// under the lab (labtest.CheckVirtual): docs/contenders.md shows both.
package setnxlock

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotObtained: another holder has the key.
var ErrNotObtained = errors.New("setnxlock: not obtained")

// ErrLost: the key no longer holds the lock's value (it expired, or
// another holder has it now).
var ErrLost = errors.New("setnxlock: lock lost")

var (
	refresh = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
	release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
)

// Locker takes locks on one Redis.
type Locker struct{ rdb *redis.Client }

// New is a Locker on rdb.
func New(rdb *redis.Client) *Locker { return &Locker{rdb: rdb} }

// Lock is one held lock.
type Lock struct {
	rdb        *redis.Client
	key, value string
	ttl        time.Duration
	until      time.Time
}

// Obtain takes key for ttl, or returns ErrNotObtained.
func (l *Locker) Obtain(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	sent := time.Now() // Redis counts the TTL from later than this
	value := rand.Text()
	ok, err := l.rdb.SetNX(ctx, key, value, ttl).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotObtained
	}
	return &Lock{rdb: l.rdb, key: key, value: value, ttl: ttl, until: sent.Add(ttl)}, nil
}

// Until is when the lock ends unless refreshed.
func (k *Lock) Until() time.Time { return k.until }

// Refresh extends the lock by its TTL, or returns ErrLost.
func (k *Lock) Refresh(ctx context.Context) error {
	sent := time.Now()
	n, err := refresh.Run(ctx, k.rdb, []string{k.key}, k.value, k.ttl.Milliseconds()).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrLost
	}
	k.until = sent.Add(k.ttl)
	return nil
}

// Release gives the lock up, or returns ErrLost.
func (k *Lock) Release(ctx context.Context) error {
	n, err := release.Run(ctx, k.rdb, []string{k.key}, k.value).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrLost
	}
	return nil
}
