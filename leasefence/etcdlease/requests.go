package etcdlease

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// request is an acquire's request id, created in the same transaction as
// the holder key (so with the same create revision), for retries.
func (k keys) request(id string) string { return k.prefix + "requests/" + id }

type requestValue struct {
	Holder   string `json:"holder"`
	Resource string `json:"resource"`
	TTL      int64  `json:"ttlSeconds"` // as granted by etcd
}

// replayLease returns the lease request records are attached to, granting a
// new one (for twice the replay window) once the current one is a window
// old: each record lives between one and two windows.
func (c *Coordinator) replayLease(ctx context.Context) (clientv3.LeaseID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replay != 0 && time.Since(c.replayAt) < c.window {
		return c.replay, nil
	}
	g, err := c.cli.Grant(ctx, int64(2*c.window/time.Second))
	if err != nil {
		return 0, err
	}
	c.replay, c.replayAt = g.ID, time.Now()
	return c.replay, nil
}

func (c *Coordinator) forgetReplayLease(id clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replay == id {
		c.replay = 0
	}
}
