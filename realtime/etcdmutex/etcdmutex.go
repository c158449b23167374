// Package etcdmutex puts etcd's own lock, the concurrency package's Mutex
// on a Session, under the lab as the contenders etcd-mutex and
// etcd-mutex-fenced, unmodified: each Acquire is a Session on a lease of
// its own and one Mutex.TryLock on the resource's prefix; Release is
// Mutex.Unlock and the lease's revocation.
//
// The Session's keepalive is the holder's: the adapter orphans the session
// (Session.Orphan) as soon as it has its lease, and the holder keeps the
// lease alive with its renewals (Renew: one KeepAliveOnce). So a holder
// that stalls stops keeping its session alive, as a paused process does,
// and etcd expires its lease and deletes its lock key: the next TryLock
// takes the lock while the stalled holder still believes it holds it.
// That is the finding Jepsen published for etcd 3.4.3 (jepsen.io/analyses/
// etcd-3.4.3): etcd's locks cannot by themselves guarantee mutual
// exclusion. The holder's deadline is the lease's TTL counted from the
// request's send, on its own clock.
//
// Generations are the lock key's create revision, the order in which
// etcd granted the lock (realtime.Ordered). etcd-mutex-fenced uses that
// same revision as its fence, and its holders write through the
// resource's gate with it: the remedy.
package etcdmutex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/embedded"
	"github.com/leasefence/lab/registry"
)

func init() { realtime.RegisterLockPair(contenderName, Open, Attach) }

// contenderName is the registry's name of the contender, fenced or not.
func contenderName(fenced bool) string {
	if fenced {
		return registry.EtcdMutexFenced
	}
	return registry.EtcdMutex
}

// Lock is etcd's Mutex as a realtime.Lock, on the client's cluster, its
// keys under Prefix. Fenced leases report their create revision as
// their fence.
type Lock struct {
	Client *clientv3.Client
	Prefix string
	Fenced bool
}

// ErrWholeSeconds: etcd's leases are whole seconds.
var ErrWholeSeconds = errors.New("etcdmutex: etcd's leases are whole seconds")

// seconds is ttl in etcd's whole seconds.
func seconds(ttl time.Duration) (int64, error) {
	s := ttl.Seconds()
	if s < 1 || s != math.Trunc(s) {
		return 0, fmt.Errorf("%w: ttl %v", ErrWholeSeconds, ttl)
	}
	return int64(s), nil
}

// Acquire implements realtime.Lock: a Session on a new lease, orphaned,
// and one TryLock.
func (l *Lock) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (realtime.Lease, error) {
	secs, err := seconds(ttl)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	grant, err := l.Client.Grant(ctx, secs)
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(l.Client, concurrency.WithLease(grant.ID), concurrency.WithContext(ctx))
	if err != nil {
		l.revoke(grant.ID)
		return nil, err
	}
	sess.Orphan() // the holder's renewals keep the lease alive, nothing else
	m := concurrency.NewMutex(sess, l.Prefix+resource)
	if err := m.TryLock(ctx); err != nil {
		l.revoke(grant.ID)
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("etcdmutex: %s: %w", resource, realtime.ErrHeld)
		}
		return nil, err
	}
	return &lease{l: l, m: m, id: grant.ID, ttl: time.Duration(grant.TTL) * time.Second, rev: uint64(m.Header().Revision),
		deadline: sent.Add(time.Duration(grant.TTL) * time.Second)}, nil
}

func (l *Lock) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.Client.Revoke(ctx, id) // best effort: the lease expires anyway
}

type lease struct {
	l   *Lock
	m   *concurrency.Mutex
	id  clientv3.LeaseID
	ttl time.Duration
	rev uint64

	mu       sync.Mutex
	deadline time.Time
}

// Deadline implements realtime.Lease: the lease's TTL from the last send
// that etcd answered.
func (le *lease) Deadline() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.deadline
}

// Fence implements realtime.Lease: the create revision, for the fenced
// contender.
func (le *lease) Fence() (uint64, bool) { return le.rev, le.l.Fenced }

// Generation implements realtime.Ordered: the lock key's create revision.
func (le *lease) Generation() uint64 { return le.rev }

// ErrLost: etcd no longer has the session's lease. It matches
// realtime.ErrNotHeld, as the lease contract asks.
var ErrLost = fmt.Errorf("etcdmutex: the session's lease is gone: %w", realtime.ErrNotHeld)

// Renew implements realtime.Lease: one KeepAliveOnce of the lease. Its
// error is ErrLost when etcd has the lease no more (asked by TimeToLive:
// the client's own error for it is a gRPC status of etcd's API module).
func (le *lease) Renew(ctx context.Context) error {
	sent := time.Now()
	ka, err := le.l.Client.KeepAliveOnce(ctx, le.id)
	if err != nil {
		if ttl, terr := le.l.Client.TimeToLive(ctx, le.id); ctx.Err() == nil && terr == nil && ttl.TTL <= 0 {
			return fmt.Errorf("%w (%w)", ErrLost, err)
		}
		return err
	}
	if ka.TTL <= 0 {
		return ErrLost
	}
	le.mu.Lock()
	le.deadline = sent.Add(time.Duration(ka.TTL) * time.Second)
	le.mu.Unlock()
	return nil
}

// Release implements realtime.Lease: Mutex.Unlock, and the lease revoked.
func (le *lease) Release(ctx context.Context) error {
	if err := le.m.Unlock(ctx); err != nil {
		return err
	}
	le.l.revoke(le.id)
	return nil
}

// Open starts an embedded etcd under dir ("" for the system's temporary
// directory), in a directory marked as this process's (a run killed
// before it closes leaves nothing the next run does not remove), and
// returns the contender on it: etcd-mutex, or with fenced
// etcd-mutex-fenced. Closing the contender stops the etcd; its Share is
// the etcd's client URL, for Attach in an agent's process.
func Open(_ context.Context, dir string, fenced bool) (*realtime.Contender, error) {
	return embedded.Contender(dir, contenderName(fenced), func(endpoint string) (*realtime.Contender, error) {
		return Attach(endpoint, fenced)
	})
}

// Attach is the contender on the etcd at endpoint (another contender's
// Share): etcd-mutex, or with fenced etcd-mutex-fenced. Closing it closes
// its client only.
func Attach(endpoint string, fenced bool) (*realtime.Contender, error) {
	name := contenderName(fenced)
	e := registry.Must(registry.Contenders, name)
	cli, err := etcdembed.Client(endpoint)
	if err != nil {
		return nil, err
	}
	return &realtime.Contender{
		Info: history.Contender{Name: history.Mode(name), Library: e.Library, Version: e.Version, Fence: fenced, Discipline: history.Discipline(e.Discipline),
			NotExpressible: e.NotExpressible, Generations: map[bool]string{false: realtime.GenerationsServer, true: realtime.GenerationsFence}[fenced]},
		New: func(_ context.Context, mode history.Mode) (realtime.Lock, error) {
			return &Lock{Client: cli, Prefix: "/" + name + "/" + string(mode) + "/", Fenced: fenced}, nil
		},
		Share:   endpoint,
		OnClose: cli.Close,
	}, nil
}
