// Package k8slease puts client-go's leader election (the LeaderElector of
// k8s.io/client-go/tools/leaderelection, the version this module pins)
// under the lab as the contenders k8s-leaderelection and
// k8s-leaderelection-fenced, unmodified, on an embedded etcd of its own
// that keeps the Lease objects as kube-apiserver does (LeaseLock): no API
// server runs, and the elector cannot tell.
//
// A holder is a candidate as a controller's replica is: its first Acquire
// of a resource starts an elector (LeaseDuration the TTL, RenewDeadline
// two thirds of it and RetryPeriod two fifteenths, the proportions of
// kube-controller-manager's 15s, 10s and 2s; ReleaseOnCancel set), and
// every Acquire waits, until its context ends, for the elector's
// OnStartedLeading. An Acquire that ends first answers that another holds
// the lock, and the elector stays a candidate for the next. Each elector's
// identity is the holder's name with a suffix of its own, as client-go's
// examples draw one (a restarted holder is a new candidate).
//
// The holder acts as leader from OnStartedLeading until OnStoppedLeading,
// as controllers do: the elector renews the Lease by itself, and tells the
// holder nothing else. So the lease's Deadline is what the Lease object
// says of the last record the elector committed (renewTime plus
// leaseDurationSeconds: no other elector takes the Lease before it), cut
// short at OnStoppedLeading; Renew asks the elector whether it still leads
// and that record whether it still runs; Release cancels the elector,
// which gives the Lease up with a write of an empty holder, and answers
// whether that write replaced a live record of the holder's own. Nothing
// here checks time for the holder: a holder paused past the Lease's
// duration (agents as processes, SIGSTOP) wakes still a leader until its
// elector, waking too, fails to renew, while another elector took the
// Lease: the split brain client-go's documentation warns of ("does not
// guarantee that only one client is acting as a leader (a.k.a.
// fencing)").
//
// Generations are the revision of the write that acquired the Lease for
// the holder's elector (realtime.Ordered), fixed for its leadership term:
// the renewals' writes do not change it. k8s-leaderelection-fenced uses
// that revision as its fence, and its holders write through the
// resource's gate with it: the remedy.
package k8slease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

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
		return registry.K8sLeaderElectionFenced
	}
	return registry.K8sLeaderElection
}

// Lock is client-go's LeaderElector as a realtime.Lock, its Lease objects
// in the client's etcd under namespace Namespace, one per resource.
// Fenced leases report the revision that acquired the Lease as their
// fence. Close stops every elector it started.
type Lock struct {
	Client    *clientv3.Client
	Namespace string
	Fenced    bool

	mu         sync.Mutex
	candidates map[candidacy]*candidate
	closed     bool
}

// candidacy is one holder standing for one resource.
type candidacy struct{ resource, holder string }

// candidate is one elector's Run, from its start until it returns.
type candidate struct {
	lock    *LeaseLock
	cancel  context.CancelFunc
	started chan struct{} // closed at OnStartedLeading
	stopped chan struct{} // closed at OnStoppedLeading
	done    chan struct{} // closed once Run returned

	mu        sync.Mutex
	stoppedAt time.Time
	handed    bool // an Acquire has answered with its leadership
}

// ErrWholeSeconds: a Lease's duration is whole seconds.
var ErrWholeSeconds = errors.New("k8slease: a Lease's duration is whole seconds")

// timings are the elector's durations for a Lease of ttl, in the
// proportions of kube-controller-manager's defaults (15s, 10s, 2s).
func timings(ttl time.Duration) (lease, renew, retry time.Duration, err error) {
	if s := ttl.Seconds(); s < 1 || s != math.Trunc(s) {
		return 0, 0, 0, fmt.Errorf("%w: ttl %v", ErrWholeSeconds, ttl)
	}
	return ttl, ttl * 2 / 3, ttl * 2 / 15, nil
}

// Acquire implements realtime.Lock: it waits, until ctx ends, for the
// holder's elector on resource to lead, starting one if the holder has
// none running.
func (l *Lock) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (realtime.Lease, error) {
	c, err := l.candidate(resource, holder, ttl)
	if err != nil {
		return nil, err
	}
	select {
	case <-c.started:
	case <-c.done:
		return nil, fmt.Errorf("k8slease: %s: the elector stopped: %w", resource, realtime.ErrHeld)
	case <-ctx.Done():
		return nil, fmt.Errorf("k8slease: %s: %w", resource, realtime.ErrHeld)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stopped:
		return nil, fmt.Errorf("k8slease: %s: the elector led and stopped before it was asked: %w", resource, realtime.ErrHeld)
	default:
	}
	if c.handed {
		return nil, fmt.Errorf("k8slease: %s: %s leads already: %w", resource, holder, realtime.ErrHeld)
	}
	c.handed = true
	return &lease{c: c, rev: uint64(c.lock.Acquired()), fenced: l.Fenced}, nil
}

// candidate is the holder's running elector on resource, or a new one.
func (l *Lock) candidate(resource, holder string, ttl time.Duration) (*candidate, error) {
	leaseDur, renew, retry, err := timings(ttl)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("k8slease: the lock is closed")
	}
	key := candidacy{resource, holder}
	if c, ok := l.candidates[key]; ok {
		return c, nil
	}
	c := &candidate{
		lock:    &LeaseLock{Client: l.Client, Namespace: l.Namespace, Name: resource, ID: holder + "_" + rand.Text()[:8]},
		started: make(chan struct{}), stopped: make(chan struct{}), done: make(chan struct{}),
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: c.lock, LeaseDuration: leaseDur, RenewDeadline: renew, RetryPeriod: retry, ReleaseOnCancel: true, Name: resource,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(c.started) },
			OnStoppedLeading: func() {
				c.mu.Lock()
				c.stoppedAt = time.Now()
				c.mu.Unlock()
				close(c.stopped)
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("k8slease: %w", err)
	}
	// The elector logs through klog, to the process's stderr unless its
	// context carries a logger: the lab's output keeps to the lab's.
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	c.cancel = cancel
	if l.candidates == nil {
		l.candidates = make(map[candidacy]*candidate)
	}
	l.candidates[key] = c
	go func() {
		defer close(c.done)
		le.Run(ctx)
		l.mu.Lock()
		if l.candidates[key] == c {
			delete(l.candidates, key)
		}
		l.mu.Unlock()
	}()
	return c, nil
}

// Close implements io.Closer: it stops every elector still running, each
// giving its Lease up if it leads, and waits for them.
func (l *Lock) Close() error {
	l.mu.Lock()
	l.closed = true
	var running []*candidate
	for _, c := range l.candidates {
		running = append(running, c)
	}
	l.mu.Unlock()
	for _, c := range running {
		c.cancel()
		<-c.done
	}
	return nil
}

// lease is one leadership term of an elector.
type lease struct {
	c      *candidate
	rev    uint64 // the revision of the write that acquired the Lease
	fenced bool
}

// Deadline implements realtime.Lease: the expiry of the last record the
// elector committed for itself, or the instant it stopped leading if
// earlier.
func (le *lease) Deadline() time.Time {
	d := le.c.lock.Expiry()
	le.c.mu.Lock()
	defer le.c.mu.Unlock()
	if !le.c.stoppedAt.IsZero() && le.c.stoppedAt.Before(d) {
		return le.c.stoppedAt
	}
	return d
}

// Fence implements realtime.Lease: the acquiring revision, for the fenced
// contender.
func (le *lease) Fence() (uint64, bool) { return le.rev, le.fenced }

// Generation implements realtime.Ordered: the acquiring revision.
func (le *lease) Generation() uint64 { return le.rev }

// Renew implements realtime.Lease: the elector renews by itself; this
// asks whether it still leads, and whether the record it last committed
// still runs.
func (le *lease) Renew(context.Context) error {
	select {
	case <-le.c.stopped:
		return fmt.Errorf("k8slease: the elector stopped leading: %w", realtime.ErrNotHeld)
	default:
	}
	if !time.Now().Before(le.c.lock.Expiry()) {
		return fmt.Errorf("k8slease: the Lease's record expired unrenewed: %w", realtime.ErrNotHeld)
	}
	return nil
}

// Release implements realtime.Lease: it cancels the elector, which gives
// the Lease up (ReleaseOnCancel), and waits for it to return. It answers
// ErrNotHeld unless the elector still led and its release replaced a live
// record of its own.
func (le *lease) Release(ctx context.Context) error {
	select {
	case <-le.c.stopped:
		return fmt.Errorf("k8slease: the elector had stopped leading: %w", realtime.ErrNotHeld)
	default:
	}
	le.c.cancel()
	select {
	case <-le.c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !le.c.lock.Released() {
		return fmt.Errorf("k8slease: the release replaced no live record of the holder's: %w", realtime.ErrNotHeld)
	}
	return nil
}

// Open starts an embedded etcd under dir ("" for the system's temporary
// directory), in a directory marked as this process's (a run killed
// before it closes leaves nothing the next run does not remove), and
// returns the contender on it: k8s-leaderelection, or with fenced
// k8s-leaderelection-fenced. Closing the contender stops the etcd; its
// Share is the etcd's client URL, for Attach in an agent's process.
func Open(_ context.Context, dir string, fenced bool) (*realtime.Contender, error) {
	return embedded.Contender(dir, contenderName(fenced), func(endpoint string) (*realtime.Contender, error) {
		return Attach(endpoint, fenced)
	})
}

// Attach is the contender on the etcd at endpoint (another contender's
// Share): k8s-leaderelection, or with fenced k8s-leaderelection-fenced.
// Closing it closes its client only. Each mode's Lease objects are in a
// namespace named after it.
func Attach(endpoint string, fenced bool) (*realtime.Contender, error) {
	name := contenderName(fenced)
	e := registry.Must(registry.Contenders, name)
	cli, err := etcdembed.Client(endpoint)
	if err != nil {
		return nil, err
	}
	return &realtime.Contender{
		Info: history.Contender{Name: history.Mode(name), Library: e.Library, Version: e.Version, Fence: fenced, Discipline: e.Discipline,
			NotExpressible: e.NotExpressible, Generations: map[bool]string{false: realtime.GenerationsServer, true: realtime.GenerationsFence}[fenced]},
		New: func(_ context.Context, mode history.Mode) (realtime.Lock, error) {
			return &Lock{Client: cli, Namespace: string(mode), Fenced: fenced}, nil
		},
		Share:   endpoint,
		OnClose: cli.Close,
	}, nil
}
