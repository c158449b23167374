package redislocks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// adapter is one contender of this package: how many servers it runs on,
// and its lock on a client of each, its keys under prefix.
type adapter struct {
	servers int
	newLock func(rdbs []*redis.Client, prefix string) realtime.Lock
	// opened, if set, completes the contender on the servers it started.
	opened func(c *realtime.Contender, s *servers)
	// bounded: each call to a server is bounded by its context (newClient).
	bounded bool
}

// register registers contender name's opener, which starts its servers,
// and its attacher, which reaches them from an agent's process; and, for
// a lock on one Redis, the opener that puts it on the Redis backend's own
// (beside).
func register(name string, a adapter) {
	adapters[name] = a
	if a.servers == 1 {
		registry.SetOpener(registry.Contenders, name, realtime.ContenderBeside(func(ctx context.Context, b realtime.Backend) (*realtime.Contender, bool, error) {
			r, ok := b.(redisBackend)
			if !ok {
				return nil, false, nil
			}
			c, err := beside(name, a, r)
			return c, err == nil, err
		}))
	}
	registry.SetOpener(registry.Contenders, name, realtime.ContenderOpener(func(ctx context.Context, dir string) (*realtime.Contender, error) {
		c, _, err := open(ctx, dir, name, a)
		return c, err
	}))
	registry.SetOpener(registry.Contenders, name, realtime.ContenderAttacher(func(_ context.Context, share string) (*realtime.Contender, error) {
		return attach(name, a, share)
	}))
}

// adapters are this package's contenders, by name.
var adapters = make(map[string]adapter)

// ErrServers is OnClients' error for a contender it does not have, or
// clients not as many as its servers.
var ErrServers = errors.New("redislocks: no such contender on these clients")

// OnClients is contender name's lock on the given clients, one per server
// it runs on (redlock's RedlockServers, one for the others), its keys
// under a prefix of each mode's: the contender on servers the caller
// provides (in a testing/synctest bubble, in-memory servers reached
// through each client's Dialer). Closing it closes none of the clients,
// and it restarts nothing (its OnRestart is the caller's to set).
func OnClients(name string, rdbs []*redis.Client) (*realtime.Contender, error) {
	a, ok := adapters[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %q is not a contender of this package", ErrServers, name)
	case len(rdbs) != a.servers:
		return nil, fmt.Errorf("%w: %s runs on %d servers, given %d clients", ErrServers, name, a.servers, len(rdbs))
	}
	return contender(name, a, "", rdbs), nil
}

// servers are the redis-servers one contender started, in a directory
// marked as this process's (so that a run killed before it closes them
// leaves nothing the next run does not remove), and a client of each.
type servers struct {
	dir string
	srv []*redisdeploy.Server
	rdb []*redis.Client
}

// newClient is a client of the server at addr, go-redis's defaults as its
// documentation shows them; bounded, its calls are bounded by their
// context's deadline too (go-redis ignores it by default, waiting out its
// 3s read timeout and its retries). Over several servers that is what
// the quorum needs: redsync bounds its call to each server by a twentieth
// of the expiry, so that a server that does not answer costs an Acquire
// that much, not seconds, and a majority can still grant in time.
func newClient(addr string, bounded bool) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: bounded})
}

// startServers starts a's lone redis-servers under dir, each on a port and
// a directory of its own. On an error nothing is left running.
func startServers(ctx context.Context, dir, name string, a adapter) (*servers, error) {
	own, err := scratch.MkdirTemp(dir, "leasefence-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("redislocks: %w", err)
	}
	s := &servers{dir: own}
	for range a.servers {
		srv, err := redisdeploy.StartServer(ctx, redisdeploy.ServerOptions{Dir: own})
		if err != nil {
			return nil, errors.Join(err, s.close())
		}
		s.srv = append(s.srv, srv)
		s.rdb = append(s.rdb, newClient(srv.Addr(), a.bounded))
	}
	return s, nil
}

// close closes the clients and stops the servers, removing their
// directories.
func (s *servers) close() error {
	errs := []error{closeAll(s.rdb)}
	for _, srv := range s.srv {
		errs = append(errs, srv.Close())
	}
	s.srv, s.rdb = nil, nil
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
		s.dir = ""
	}
	return errors.Join(errs...)
}

func closeAll(rdbs []*redis.Client) error {
	var errs []error
	for _, c := range rdbs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// share is how an agent's process reaches a contender's servers, and the
// prefix its keys are under ("" on servers of its own).
type share struct {
	Addrs  []string `json:"addrs"`
	Prefix string   `json:"prefix,omitempty"`
}

// redisBackend is the Redis backend (redisbackend.Redis), as this package
// reaches it without importing a sibling adapter: its Redis, the address
// another process reaches it at, and the run's key prefix.
type redisBackend interface {
	realtime.Backend
	NewClient(bounded bool) (*redis.Client, error)
	Addr() string
	Prefix() string
}

// beside is contender name's lock on the Redis backend r's own Redis, its
// keys under the run's prefix (so that the backend's Close deletes them),
// through a client of its own as an application has one (through the
// Sentinels on the sentinel topology): the faults the run plays on r's
// servers strike it. An agent's process reaches it as it reaches the
// backend, at the server's address. Closing it closes its client only.
func beside(name string, a adapter, r redisBackend) (*realtime.Contender, error) {
	rdb, err := r.NewClient(a.bounded)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(share{Addrs: []string{r.Addr()}, Prefix: r.Prefix()})
	if err != nil {
		return nil, errors.Join(err, rdb.Close())
	}
	c := contender(name, a, r.Prefix(), []*redis.Client{rdb})
	c.Share, c.OnClose = string(b), rdb.Close
	return c, nil
}

// contender is contender name's lock on rdbs, with their keys under base
// and a prefix of each mode's.
func contender(name string, a adapter, base string, rdbs []*redis.Client) *realtime.Contender {
	e := registry.Must(registry.Contenders, name)
	return &realtime.Contender{
		Info: history.Contender{Name: history.Mode(name), Library: e.Library, Version: e.Version, Fence: e.Fence, Discipline: history.Discipline(e.Discipline),
			NotExpressible: e.NotExpressible, Generations: realtime.GenerationsObserved},
		New: func(_ context.Context, mode history.Mode) (realtime.Lock, error) {
			return a.newLock(rdbs, base+name+":"+string(mode)+":"), nil
		},
	}
}

// open starts a's servers under dir and returns contender name on them.
// Closing the contender stops the servers.
func open(ctx context.Context, dir, name string, a adapter) (*realtime.Contender, *servers, error) {
	s, err := startServers(ctx, dir, name, a)
	if err != nil {
		return nil, nil, err
	}
	var sh share
	for _, srv := range s.srv {
		sh.Addrs = append(sh.Addrs, srv.Addr())
	}
	b, err := json.Marshal(sh)
	if err != nil {
		return nil, nil, errors.Join(err, s.close())
	}
	c := contender(name, a, "", s.rdb)
	c.Share, c.OnClose = string(b), s.close
	if a.opened != nil {
		a.opened(c, s)
	}
	return c, s, nil
}

// attach reaches the servers of contender name whose Share was sh, from
// another process. Closing the contender closes its clients only.
func attach(name string, a adapter, sh string) (*realtime.Contender, error) {
	var s share
	if err := json.Unmarshal([]byte(sh), &s); err != nil {
		return nil, fmt.Errorf("redislocks: attaching %s: %w", name, err)
	}
	if len(s.Addrs) != a.servers {
		return nil, fmt.Errorf("redislocks: attaching %s: %d servers, want %d", name, len(s.Addrs), a.servers)
	}
	rdbs := make([]*redis.Client, len(s.Addrs))
	for i, addr := range s.Addrs {
		rdbs[i] = newClient(addr, a.bounded)
	}
	c := contender(name, a, s.Prefix, rdbs)
	c.OnClose = func() error { return closeAll(rdbs) }
	return c, nil
}
