package redislocks

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// redlock is the redlock contender: redsync over RedlockServers servers.
// A scenario's restarts restart redis-1.
var redlock = adapter{servers: registry.RedlockServers, bounded: true,
	newLock: func(rdbs []*redis.Client, prefix string) realtime.Lock { return NewRedlock(prefix, rdbs...) },
	opened: func(c *realtime.Contender, s *servers) {
		c.OnRestart = func(ctx context.Context, persist bool) error { return (&Redlock{s: s}).Restart(ctx, 0, persist) }
		c.RestartTarget = "redlock's server redis-1"
	}}

func init() { register(registry.Redlock, redlock) }

// Redlock is the redlock contender's servers: registry.RedlockServers
// independent redis-servers, each started by the contender on a port and
// a directory of its own, named redis-1, redis-2, ... in the order of
// Server's index (from 0).
type Redlock struct{ s *servers }

// OpenRedlock starts the servers under dir ("" for the system's
// temporary directory) and returns the contender redlock on them:
// redsync over one pool per server (NewRedlock). A scenario's restarts
// restart redis-1 alone (on its append-only file when the restart
// persists, on no data when it does not), so that a majority of the
// servers stays healthy throughout. Closing the contender stops every
// server and removes its directory.
func OpenRedlock(ctx context.Context, dir string) (*realtime.Contender, *Redlock, error) {
	c, s, err := open(ctx, dir, registry.Redlock, redlock)
	if err != nil {
		return nil, nil, err
	}
	return c, &Redlock{s: s}, nil
}

// Server is the i-th server (from 0: redis-1 is Server(0)).
func (rl *Redlock) Server(i int) *redisdeploy.Server { return rl.s.srv[i] }

// Restart restarts the i-th server (from 0): killed and started again on
// the same port, on its append-only file (fsynced before every reply, so
// it loses nothing it answered) with persist, on no data without, as a
// server that kept nothing on disk comes back.
func (rl *Redlock) Restart(ctx context.Context, i int, persist bool) error {
	if i < 0 || i >= len(rl.s.srv) {
		return fmt.Errorf("redislocks: redlock has no server %d of %d", i+1, len(rl.s.srv))
	}
	srv := rl.s.srv[i]
	if persist {
		return srv.Restart(ctx)
	}
	return srv.RestartEmpty(ctx)
}
