// Package zklock puts ZooKeeper's lock recipe as go-zookeeper/zk
// implements it (zk.Lock) under the lab as the contenders zookeeper and
// zookeeper-fenced, unmodified, on a throwaway standalone ZooKeeper of
// its own (Debian's zookeeper package, on the java already installed;
// scripts/zookeeper.sh install installs it), or on the one
// $LEASEFENCE_ZK_ADDR names (scripts/zookeeper.sh start starts one), each
// run under a znode of its own.
//
// Each Acquire is a session of its own, whose timeout is the TTL, and one
// zk.Lock on the resource's znode: an ephemeral sequential child, held
// once it is the lowest. zk.Lock takes no context and waits for the lock
// as long as it takes, as it is used: Acquire waits for it until its
// context ends, and then closes the session (the only way to stop a
// waiting zk.Lock), answering that another holds the lock. Release is
// Unlock and the session's close.
//
// The session is the library's: its connection pings the server every
// third of the timeout, from goroutines of its own. A holder's belief is
// what the library tells it, and zk.Lock tells it nothing after the grant
// (no deadline, no callback): the holder believes while its lock znode is
// there under its session. Renew asks the server exactly that (one Exists
// of the znode, whose ephemeral owner must be the session), and Deadline
// is the timeout from the send of the last request the server answered:
// ZooKeeper expires a session no earlier than the timeout after it last
// heard from it, so the deadline never claims more than the server
// granted. An agent that stalls as a goroutine stops nothing of the
// library's, so its session lives on and the lock stays held; an agent
// whose whole process is paused (agents as processes, SIGSTOP) stops its
// pings, the server expires the session and deletes the lock znode, the
// next waiter's zk.Lock takes the lock, and the paused holder wakes to
// write on the strength of its last check: the split brain of lock
// recipes without a fence (CURATOR-206, Kleppmann 2016).
//
// Generations are the lock znode's czxid, the transaction that created
// it, ZooKeeper's own order (realtime.Ordered), read with Children and
// Exists without changing the library. zookeeper-fenced uses that czxid
// as its fence, and its holders write through the resource's gate with
// it: the remedy.
package zklock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

func init() { realtime.RegisterLockPair(contenderName, Open, Attach) }

// contenderName is the registry's name of the contender, fenced or not.
func contenderName(fenced bool) string {
	if fenced {
		return registry.ZooKeeperFenced
	}
	return registry.ZooKeeper
}

// Lock is zk.Lock as a realtime.Lock, on the ZooKeeper at Addr, its lock
// znodes under Root. Fenced leases report their czxid as their fence.
// MinTTL and MaxTTL are the session timeouts the server grants as asked
// (zero: those of the server Open starts). Close ends every session it
// opened.
type Lock struct {
	Addr           string
	Root           string
	Fenced         bool
	MinTTL, MaxTTL time.Duration

	mu    sync.Mutex
	conns map[*zk.Conn]bool
}

// ErrTTL: the TTL is not a session timeout the server grants as asked.
// The server would grant another, and the lease's deadline, the timeout
// from a send, would not be the server's.
var ErrTTL = errors.New("zklock: the ttl is not a session timeout the server grants as asked")

// ErrLost: the lock znode is gone, or its session is no longer the
// holder's: the server expired the session. It matches
// realtime.ErrNotHeld, as the lease contract asks.
var ErrLost = fmt.Errorf("zklock: the lock znode is no longer the session's: %w", realtime.ErrNotHeld)

// quiet drops the library's log lines (a connection's every reconnect).
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// dial opens a session of timeout ttl on the server at addr.
func dial(addr string, ttl time.Duration) (*zk.Conn, error) {
	c, _, err := zk.Connect([]string{addr}, ttl, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	return c, err
}

// connect opens a session of timeout ttl, kept until l.end(c) or Close.
func (l *Lock) connect(ttl time.Duration) (*zk.Conn, error) {
	c, err := dial(l.Addr, ttl)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		l.conns = make(map[*zk.Conn]bool)
	}
	l.conns[c] = true
	return c, nil
}

// end closes session c: the server deletes its ephemeral znodes.
func (l *Lock) end(c *zk.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// Close implements io.Closer: it ends every session still open.
func (l *Lock) Close() error {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	return nil
}

// within runs f, a call of the library's that takes no context, and
// returns its result, or ctx's error if ctx ends first (f then runs on,
// until its session ends).
func within[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Acquire implements realtime.Lock: a new session and one zk.Lock, waited
// for until ctx ends.
func (l *Lock) Acquire(ctx context.Context, resource, _ string, ttl time.Duration) (realtime.Lease, error) {
	lo, hi := cmp.Or(l.MinTTL, minSession), cmp.Or(l.MaxTTL, maxSession)
	if ttl < lo || ttl > hi || ttl%time.Millisecond != 0 {
		return nil, fmt.Errorf("%w: ttl %v, and it grants whole milliseconds from %v to %v", ErrTTL, ttl, lo, hi)
	}
	c, err := l.connect(ttl)
	if err != nil {
		return nil, err
	}
	path := l.Root + "/" + resource
	lk := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
	_, err = within(ctx, func() (struct{}, error) { return struct{}{}, lk.Lock() })
	if err != nil {
		// Waiting with a session means an earlier znode holds the lock;
		// ending the session takes this one's out of the queue.
		waiting := ctx.Err() != nil && c.State() == zk.StateHasSession
		l.end(c)
		if waiting {
			return nil, fmt.Errorf("zklock: %s: %w", resource, realtime.ErrHeld)
		}
		return nil, fmt.Errorf("zklock: locking %s: %w", path, err)
	}
	le := &lease{l: l, c: c, lk: lk, dir: path, ttl: ttl}
	if err := le.find(ctx); err != nil {
		l.end(c)
		return nil, err
	}
	return le, nil
}

type lease struct {
	l   *Lock
	c   *zk.Conn
	lk  *zk.Lock
	dir string
	ttl time.Duration

	mu       sync.Mutex
	node     string // the lock znode, once found
	czxid    int64
	deadline time.Time
}

// find reads which child of the lock's directory is the session's (zk.Lock
// keeps its path to itself) and its czxid, and dates the deadline from
// the send of that read.
func (le *lease) find(ctx context.Context) error {
	sent := time.Now()
	children, err := within(ctx, func() ([]string, error) {
		children, _, err := le.c.Children(le.dir)
		return children, err
	})
	if err != nil {
		return fmt.Errorf("zklock: reading %s: %w", le.dir, err)
	}
	for _, child := range children {
		node := le.dir + "/" + child
		stat, err := le.owned(ctx, node)
		if errors.Is(err, ErrLost) {
			continue
		}
		if err != nil {
			return err
		}
		le.mu.Lock()
		le.node, le.czxid, le.deadline = node, stat.Czxid, sent.Add(le.ttl)
		le.mu.Unlock()
		return nil
	}
	return fmt.Errorf("%w: no child of %s is the session's", ErrLost, le.dir)
}

// owned is node's stat if it exists and its ephemeral owner is the
// lease's session; ErrLost if not.
func (le *lease) owned(ctx context.Context, node string) (*zk.Stat, error) {
	stat, err := within(ctx, func() (*zk.Stat, error) {
		ok, stat, err := le.c.Exists(node)
		if err == nil && (!ok || stat.EphemeralOwner != le.c.SessionID()) {
			err = ErrLost
		}
		return stat, err
	})
	if err != nil && !errors.Is(err, ErrLost) {
		return nil, fmt.Errorf("zklock: reading %s: %w", node, err)
	}
	return stat, err
}

// Deadline implements realtime.Lease: the session timeout from the send
// of the last read the server answered with the znode still the
// session's.
func (le *lease) Deadline() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.deadline
}

// Fence implements realtime.Lease: the czxid, for the fenced contender.
func (le *lease) Fence() (uint64, bool) { return uint64(le.czxid), le.l.Fenced }

// Generation implements realtime.Ordered: the lock znode's czxid.
func (le *lease) Generation() uint64 { return uint64(le.czxid) }

// Renew implements realtime.Lease: one Exists of the lock znode. The
// library keeps the session alive by itself; this asks whether the lock
// is still the session's. A lease found lost ends its session, so that
// no connection of a holder that has given up keeps pinging.
func (le *lease) Renew(ctx context.Context) error {
	sent := time.Now()
	le.mu.Lock()
	node := le.node
	le.mu.Unlock()
	if _, err := le.owned(ctx, node); err != nil {
		if ctx.Err() == nil {
			le.l.end(le.c)
		}
		return err
	}
	le.mu.Lock()
	le.deadline = sent.Add(le.ttl)
	le.mu.Unlock()
	return nil
}

// Release implements realtime.Lease: zk.Lock's Unlock, and the session's
// end. Unlock of a znode the server deleted with its expired session
// fails: the lock was no longer held.
func (le *lease) Release(ctx context.Context) error {
	_, err := within(ctx, func() (struct{}, error) { return struct{}{}, le.lk.Unlock() })
	if ctx.Err() == nil {
		le.l.end(le.c)
	}
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNotLocked):
		// The znode went with its session: the lock was no longer held.
		return fmt.Errorf("zklock: unlocking %s: %w (%w)", le.dir, realtime.ErrNotHeld, err)
	case err != nil:
		return fmt.Errorf("zklock: unlocking %s: %w", le.dir, err)
	}
	return nil
}

// EnvAddr names the variable that gives the contenders a ZooKeeper to
// run on (host:port, as scripts/zookeeper.sh env exports it) in place of
// one of their own.
const EnvAddr = "LEASEFENCE_ZK_ADDR"

// Open returns the contender zookeeper, or with fenced zookeeper-fenced,
// on a ZooKeeper of its own: the one $LEASEFENCE_ZK_ADDR names, its
// znodes under a root of the run's own that closing the contender
// deletes; else a throwaway standalone server it starts under dir ("" for
// the system's temporary directory), in a directory marked as this
// process's (a run killed before it closes leaves nothing the next run
// does not remove), which closing the contender stops. Its Share is for
// Attach in an agent's process. Without java or Debian's zookeeper
// package it fails with ErrNotInstalled.
func Open(ctx context.Context, dir string, fenced bool) (*realtime.Contender, error) {
	name := contenderName(fenced)
	if addr := os.Getenv(EnvAddr); addr != "" {
		return given(addr, name, fenced)
	}
	s, err := startServer(ctx, dir, name)
	if err != nil {
		return nil, err
	}
	c, err := attach(share{Addr: s.addr, Root: "/" + name}, fenced)
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	c.OnClose = s.close
	return c, nil
}

// given is the contender on the server at addr, under a root of its own.
func given(addr, name string, fenced bool) (*realtime.Contender, error) {
	lo, hi, err := sessionBounds(addr)
	if err != nil {
		return nil, fmt.Errorf("zklock: %s=%s does not serve as scripts/zookeeper.sh's server does (scripts/zookeeper.sh start starts one): %w", EnvAddr, addr, err)
	}
	root := "/leasefence-" + rand.Text()
	c, err := attach(share{Addr: addr, Root: root + "/" + name, MinTTL: lo, MaxTTL: hi}, fenced)
	if err != nil {
		return nil, err
	}
	c.OnClose = func() error { return removeTree(addr, root) }
	return c, nil
}

// removeTree deletes the znode root and everything under it, within a
// bound: the run's lock directories, and the lock znodes of any session
// the server has not expired yet (an agent's process killed holding one).
func removeTree(addr, root string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	var remove func(node string) error
	remove = func(node string) error {
		children, err := within(ctx, func() ([]string, error) {
			children, _, err := c.Children(node)
			return children, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, child := range children {
			if err := remove(node + "/" + child); err != nil {
				return err
			}
		}
		_, err = within(ctx, func() (struct{}, error) { return struct{}{}, c.Delete(node, -1) })
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	}
	if err := remove(root); err != nil {
		return fmt.Errorf("zklock: removing %s from %s: %w", root, addr, err)
	}
	return nil
}

// share is how an agent's process reaches a contender's server.
type share struct {
	Addr           string        `json:"addr"`
	Root           string        `json:"root"`
	MinTTL, MaxTTL time.Duration `json:",omitempty"`
}

// Attach is the contender on the server another contender's Share names:
// zookeeper, or with fenced zookeeper-fenced. Closing it ends its locks'
// sessions.
func Attach(sh string, fenced bool) (*realtime.Contender, error) {
	var s share
	if err := json.Unmarshal([]byte(sh), &s); err != nil {
		return nil, fmt.Errorf("zklock: attaching %s: %w", contenderName(fenced), err)
	}
	return attach(s, fenced)
}

func attach(s share, fenced bool) (*realtime.Contender, error) {
	name := contenderName(fenced)
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	e := registry.Must(registry.Contenders, name)
	return &realtime.Contender{
		Info: history.Contender{Name: history.Mode(name), Library: e.Library, Version: e.Version, Fence: fenced, Discipline: history.Discipline(e.Discipline),
			NotExpressible: e.NotExpressible, Generations: map[bool]string{false: realtime.GenerationsServer, true: realtime.GenerationsFence}[fenced]},
		New: func(_ context.Context, mode history.Mode) (realtime.Lock, error) {
			return &Lock{Addr: s.Addr, Root: s.Root + "/" + string(mode), Fenced: fenced, MinTTL: s.MinTTL, MaxTTL: s.MaxTTL}, nil
		},
		Share: string(b),
	}, nil
}
