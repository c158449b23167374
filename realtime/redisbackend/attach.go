package redisbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// What another process needs to take part in a run set up here: an agent
// run as a process of its own reaches the run's Redis, under the run's
// prefix (Share, and the attachers registered below).

// share is how another process reaches a Redis backend.
type share struct {
	URL    string `json:"url"`
	Prefix string `json:"prefix"`
}

// Share implements realtime.Sharer: the server's URL and the run's
// prefix.
func (r *Redis) Share() (string, error) {
	u := r.opts.URL
	if u == "" {
		u = "redis://" + r.Addr()
	}
	b, err := json.Marshal(share{URL: u, Prefix: r.prefix})
	return string(b), err
}

// Share implements realtime.Sharer: the gates are in the backend's Redis.
func (RedisStore) Share() (string, error) { return "", nil }

// AttachRedis reaches the run whose keys are under prefix on the Redis at
// url (another backend's Share). Its Close closes the client only: the
// keys and the server are the run's.
func AttachRedis(url, prefix string) (*Redis, error) {
	if url == "" || prefix == "" {
		return nil, errors.New("realtime: redis: attaching needs the run's URL and prefix")
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("realtime: redis: %w", err)
	}
	r := &Redis{opts: RedisOptions{URL: url}, prefix: prefix, attached: true}
	r.cli.Store(newRedisClient(o))
	return r, nil
}

func init() {
	registry.SetOpener(registry.Backends, registry.Redis, realtime.BackendAttacher(func(_ context.Context, sh string) (realtime.Backend, error) {
		var s share
		if err := json.Unmarshal([]byte(sh), &s); err != nil {
			return nil, fmt.Errorf("realtime: redis: attaching: %w", err)
		}
		r, err := AttachRedis(s.URL, s.Prefix)
		if err != nil {
			return nil, err // not a nil *Redis in a Backend, which Close would call
		}
		return r, nil
	}))
	registry.SetOpener(registry.Stores, registry.Redis, realtime.StoreBeside(func(r *Redis) realtime.Store { return RedisStore{R: r} }))
}
