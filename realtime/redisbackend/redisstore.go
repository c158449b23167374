package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// RedisStore keeps the resources in the backend's Redis, in the hash slot
// of their mode's coordinator: each behind a redislease.Gate, its data one
// key that each write SETs, and its record a stream that each write
// appends to, in the gate's MULTI/EXEC (fenced) or a MULTI/EXEC of its own
// (naive). The stream's entry ids, which Redis assigns in the order it
// applies the writes, order the record.
type RedisStore struct{ R *Redis }

// Name implements realtime.Store.
func (RedisStore) Name() string { return registry.Redis }

// Resource implements realtime.Store.
func (s RedisStore) Resource(_ context.Context, mode history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
	p := s.R.modePrefix(mode)
	tag := "{" + p + "}"
	res := &redisResource{r: s.R, prefix: p, name: name, now: now, data: tag + "lab:data:" + name, record: tag + "lab:writes:" + name}
	s.R.beforeLoss(res.save)
	return res, nil
}

// Close implements realtime.Store; the backend owns the server.
func (RedisStore) Close() error { return nil }

type redisResource struct {
	r            *Redis
	prefix, name string
	data, record string
	now          func() time.Duration
	mu           sync.Mutex
	saved        []realtime.Landing // the record as it was before restarts that lost it
}

func (res *redisResource) gate(cli *redis.Client) (*redislease.Gate, error) {
	return redislease.NewGate(cli, res.name, redislease.GateOptions{Prefix: res.prefix,
		Replication: res.r.opts.Replication, Watermark: res.r.watermark})
}

// queue queues the write and its entry in the record, stamped as the
// transaction is sent: the stream's order, not the stamp, orders the
// record.
func (res *redisResource) queue(ctx context.Context, p redis.Pipeliner, t leasefence.Token, id uint64) {
	p.Set(ctx, res.data, fmt.Sprintf("%s@%d", t.Holder, t.Fence), 0)
	p.XAdd(ctx, &redis.XAddArgs{Stream: res.record, Values: []any{"id", id, "at", int64(res.now())}})
}

func (res *redisResource) Commit(ctx context.Context, t leasefence.Token, id uint64) error {
	return res.r.do(func(cli *redis.Client) error {
		g, err := res.gate(cli)
		if err != nil {
			return err
		}
		return g.Commit(ctx, t, func(ctx context.Context, p redis.Pipeliner) error {
			res.queue(ctx, p, t, id)
			return nil
		})
	})
}

func (res *redisResource) Write(ctx context.Context, t leasefence.Token, id uint64) error {
	return res.r.do(func(cli *redis.Client) error {
		_, err := cli.TxPipelined(ctx, func(p redis.Pipeliner) error {
			res.queue(ctx, p, t, id)
			return nil
		})
		return err
	})
}

// Landings reads the record back in the stream's order, after what the
// restarts that lost it saved.
func (res *redisResource) Landings(ctx context.Context) ([]realtime.Landing, error) {
	var now []realtime.Landing
	err := res.r.do(func(cli *redis.Client) (err error) {
		now, err = res.read(ctx, cli)
		return err
	})
	res.mu.Lock()
	defer res.mu.Unlock()
	return append(append([]realtime.Landing(nil), res.saved...), now...), err
}

func (res *redisResource) read(ctx context.Context, cli *redis.Client) ([]realtime.Landing, error) {
	msgs, err := cli.XRange(ctx, res.record, "-", "+").Result()
	if err != nil {
		return nil, err
	}
	out := make([]realtime.Landing, 0, len(msgs))
	for _, m := range msgs {
		id, err1 := strconv.ParseUint(fmt.Sprint(m.Values["id"]), 10, 64)
		at, err2 := strconv.ParseInt(fmt.Sprint(m.Values["at"]), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("realtime: an entry %s of %s: %v", m.ID, res.record, m.Values)
		}
		out = append(out, realtime.Landing{ID: id, At: time.Duration(at)})
	}
	return out, nil
}

// save keeps the record as it is now, before a restart loses it.
func (res *redisResource) save(ctx context.Context, cli *redis.Client) error {
	got, err := res.read(ctx, cli)
	if err != nil {
		return err
	}
	res.mu.Lock()
	res.saved = append(res.saved, got...)
	res.mu.Unlock()
	return nil
}

func (res *redisResource) Admit(ctx context.Context, t leasefence.Token) error {
	return res.r.do(func(cli *redis.Client) error {
		g, err := res.gate(cli)
		if err != nil {
			return err
		}
		return g.Admit(ctx, t)
	})
}

func (res *redisResource) Floor(ctx context.Context) (floor leasefence.Token, err error) {
	err = res.r.do(func(cli *redis.Client) error {
		g, err := res.gate(cli)
		if err != nil {
			return err
		}
		floor, err = g.Floor(ctx)
		return err
	})
	return floor, err
}

func init() {
	registry.SetOpener(registry.Stores, registry.Redis, realtime.StoreOpener(func(s *realtime.Setup) (realtime.Store, error) {
		return RedisStore{R: s.Backend.(*Redis)}, nil
	}))
}
