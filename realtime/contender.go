package realtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// Lock is a lock implementation as the code under test calls it: a
// contender, whether a library run unmodified behind an adapter or a
// user's own. The runner's agents call it in place of the lab's
// coordinator, through the same fault layer.
type Lock interface {
	// Acquire tries once to take resource for holder for ttl. It returns
	// ErrHeld (wrapped or not) when another holder has it.
	Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (Lease, error)
}

// Lease is one held lock. Its contract, which the runner holds a lock to
// from the record (history.Findings' lock finding):
//   - Renew and Release of a lease that is no longer live (it expired,
//     was released, or another holder was granted the resource) return an
//     error matching ErrNotHeld with errors.Is (a lock may wrap its own).
//     A Renew answered nil though sent after the record shows the lease
//     ended, or a Release answered nil for a lease the record shows no
//     longer live, is the lock's contract broken; so is an error that does
//     not match ErrNotHeld there: the history records which it was (a
//     refusal's reason, history.ReasonNotHeldUnmatched). Elsewhere (a
//     lease still live) any error is taken for the lock lost.
//   - Deadline never lies past what the server granted: the history takes
//     it for the lease's expiry, so a Deadline past the server's shows as
//     a grant of the resource while the lease still ran, a
//     mutual-exclusion violation.
//   - Acquire (and Renew and Release) honour ctx: a call that returns
//     more than CallSlack after its context's deadline, or has not
//     returned a grace after the run's end, is recorded as the library's
//     error (ErrContract, NeverReturnedError), which breaks the lock
//     finding.
type Lease interface {
	// Deadline is until when the holder believes it holds the lock, on
	// its own clock; never later than the server's expiry of the lease.
	Deadline() time.Time
	// Fence is the lock's fencing token, if it has one.
	Fence() (uint64, bool)
	// Renew extends the lease by the TTL; an error means the lock is
	// lost, one matching ErrNotHeld when it is no longer live.
	Renew(ctx context.Context) error
	// Release gives the lock up; of a lease no longer live it returns an
	// error matching ErrNotHeld.
	Release(ctx context.Context) error
}

// ErrNotHeld is what a Lease's Renew and Release return (errors.Is) for a
// lease that is no longer live.
var ErrNotHeld = errors.New("realtime: lease not held")

// Ordered is a Lease whose server shows the order in which it granted its
// leases without a fence to write with (etcd: the lock key's create
// revision). Generations are numbered in that order.
type Ordered interface {
	Generation() uint64
}

// ErrContract is matched by the error of a call whose Lock broke its
// contract (an Acquire with neither a lease nor an error, leases with a
// fence and without): the run records it as the library's error, which
// fails the run.
var ErrContract = errors.New("realtime: the contender broke the Lock contract")

// ErrHeld is what a Lock's Acquire returns (errors.Is) when another holder
// has the resource.
var ErrHeld = leasefence.ErrHeld

// How a contender's lease generations are numbered, as the history header
// says it (history.Contender.Generations).
const (
	GenerationsFence    = "fence"    // the lock's own fence
	GenerationsServer   = "server"   // the server's order (Ordered)
	GenerationsObserved = "observed" // the order in which the lab saw the grants return
)

// lockService puts a Lock behind leasefence.Service, the calls the
// agents make. Each grant is named by a generation: the lease's fence,
// the server's order (Ordered), or the order in which the grants returned
// to the lab. The grant's expiry is the lease's own Deadline, so the
// history's coordinator expiry is the lock's word, which the checker's
// mutual-exclusion rule holds the lock to; its TTL is the rest of that
// Deadline, which a naive holder counts from its request's send, as the
// libraries do (the agent's belief of a naive contender): it believes
// no later than the lock's Deadline.
type lockService struct {
	lock  Lock
	clock leasefence.Clock
	ttl   time.Duration

	mu       sync.Mutex
	observed leasefence.Fence
	how      string // the way of numbering the header declared, or the first grant's; every grant must match
	leases   map[leasefence.Token]Lease
	holders  map[string]string // resource -> holder of its newest grant
}

func newLockService(lock Lock, clock leasefence.Clock, ttl time.Duration, how string) *lockService {
	return &lockService{lock: lock, clock: clock, ttl: ttl, how: how, leases: make(map[leasefence.Token]Lease), holders: make(map[string]string)}
}

// generation names a lease: its fence, its server order, or the next
// observed number; and how it did.
func (s *lockService) generation(l Lease) (leasefence.Fence, string) {
	if f, ok := l.Fence(); ok {
		return leasefence.Fence(f), GenerationsFence
	}
	if o, ok := l.(Ordered); ok {
		return leasefence.Fence(o.Generation()), GenerationsServer
	}
	s.observed++
	return s.observed, GenerationsObserved
}

// grant is the Grant that says lease l: its remaining time as TTL, its
// Deadline as the coordinator's expiry, read now on the run's clock. The
// remaining time is wall-clock time, the lock's own: the run's clock must
// be true time for the expiry to be the lock's word, which is why a
// library's contender refuses a drift of the lab's coordinator
// (registry.CoordinatorDrift) rather than be judged on a clock it never
// kept.
func (s *lockService) grant(id string, t leasefence.Token, l Lease) (leasefence.Grant, error) {
	now, err := s.clock.Now()
	if err != nil {
		return leasefence.Grant{}, fmt.Errorf("realtime: contender clock: %w", err)
	}
	left := max(time.Until(l.Deadline()), 0)
	return leasefence.Grant{RequestID: id, Token: t, TTL: left, CoordinatorExpiresAt: now.Add(left)}, nil
}

// Acquire implements leasefence.Service: one Acquire of the lock. A
// retried request is a second Acquire, as a library's caller makes it.
func (s *lockService) Acquire(ctx context.Context, req leasefence.AcquireRequest) (_ leasefence.AcquireOutcome, err error) {
	defer recovered("Acquire", &err)
	if err := leasefence.ValidateAcquire(req); err != nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("acquire: %w", err)
	}
	l, err := s.lock.Acquire(ctx, req.Resource, req.Holder, s.ttl)
	if late := unheeded(ctx, "Acquire"); late != nil {
		return leasefence.AcquireOutcome{}, late
	}
	switch {
	case errors.Is(err, ErrHeld):
		s.mu.Lock()
		holder := s.holders[req.Resource]
		s.mu.Unlock()
		reason := leasefence.ReasonHeld
		if holder == req.Holder {
			reason = leasefence.ReasonAlreadyHeld
		}
		return leasefence.AcquireOutcome{Reason: reason, HeldBy: holder, RetryAfter: max(s.ttl/10, time.Millisecond)}, nil
	case err != nil:
		return leasefence.AcquireOutcome{}, err
	case l == nil:
		return leasefence.AcquireOutcome{}, fmt.Errorf("%w: Acquire returned no lease and no error", ErrContract)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, how := s.generation(l)
	if s.how == "" {
		s.how = how
	} else if s.how != how {
		return leasefence.AcquireOutcome{}, fmt.Errorf("%w: its leases are numbered by %s and by %s: a lock either has a fence (or a server order) or it has not", ErrContract, s.how, how)
	}
	t := leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: f}
	g, err := s.grant(req.RequestID, t, l)
	if err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	s.leases[t] = l
	s.holders[req.Resource] = req.Holder
	return leasefence.AcquireOutcome{OK: true, Grant: g}, nil
}

func (s *lockService) lease(t leasefence.Token) (Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[t]
	return l, ok
}

// Renew implements leasefence.Service: the lease's Renew. An error is the
// lock lost, its reason whether it matched ErrNotHeld (notHeld).
func (s *lockService) Renew(ctx context.Context, req leasefence.RenewRequest) (_ leasefence.RenewOutcome, err error) {
	defer recovered("Renew", &err)
	l, ok := s.lease(req.Token)
	if !ok {
		return leasefence.RenewOutcome{Reason: leasefence.ReasonUnknown}, nil
	}
	err = l.Renew(ctx)
	if late := unheeded(ctx, "Renew"); late != nil {
		return leasefence.RenewOutcome{}, late
	}
	if err != nil {
		if ctx.Err() != nil {
			return leasefence.RenewOutcome{}, err
		}
		return leasefence.RenewOutcome{Reason: notHeld(err)}, nil
	}
	g, err := s.grant(req.RequestID, req.Token, l)
	if err != nil {
		return leasefence.RenewOutcome{}, err
	}
	return leasefence.RenewOutcome{OK: true, Grant: g}, nil
}

// Release implements leasefence.Service: the lease's Release. The lease
// is kept, so that a duplicated release reaches the lock again, as a
// message delivered twice reaches a server.
func (s *lockService) Release(ctx context.Context, t leasefence.Token) (_ leasefence.ReleaseOutcome, err error) {
	defer recovered("Release", &err)
	l, ok := s.lease(t)
	if !ok {
		return leasefence.ReleaseOutcome{Reason: leasefence.ReasonUnknown}, nil
	}
	err = l.Release(ctx)
	if late := unheeded(ctx, "Release"); late != nil {
		return leasefence.ReleaseOutcome{}, late
	}
	if err != nil {
		if ctx.Err() != nil {
			return leasefence.ReleaseOutcome{}, err
		}
		return leasefence.ReleaseOutcome{Reason: notHeld(err)}, nil
	}
	return leasefence.ReleaseOutcome{OK: true}, nil
}

// notHeld is the reason the history records for err, the lock's answer to
// Renew or Release: the lease expired if err matches ErrNotHeld, else
// history.ReasonNotHeldUnmatched, which the checker holds against the
// lease contract where the record shows the lease had ended. Either way
// the holder takes the lock for lost.
func notHeld(err error) leasefence.Reason {
	if errors.Is(err, ErrNotHeld) {
		return leasefence.ReasonExpired
	}
	return history.ReasonNotHeldUnmatched
}

// CallSlack is how long after its context's deadline a call to a
// contender's lock may return before it is taken for a call that does not
// honour its context: far above a loaded machine's delays in scheduling a
// goroutine, well below the grace a run gives a call still under way at
// its end (DefaultGrace).
const CallSlack = 2 * time.Second

// unheeded is the broken contract of call, a call to the lock that has
// just returned, if it returned more than CallSlack after ctx's deadline
// (the lab gives every call one): the lease contract says a lock's calls
// honour their context. The run records it as the library's error, which
// breaks the lock finding; a lease such an Acquire granted is not taken.
func unheeded(ctx context.Context, call string) error {
	deadline, ok := ctx.Deadline()
	if late := time.Since(deadline); ok && ctx.Err() != nil && late > CallSlack {
		return fmt.Errorf("%w: %s returned %s after its context's deadline: it does not honour its context", ErrContract, call, history.FormatDuration(late))
	}
	return nil
}

// recovered makes a panic in a call to the lock (call) that call's error,
// a broken contract, which the run records as the library's error of the
// agent that made it: a panic would end the program (a test binary), and
// the history with it.
func recovered(call string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%w: %s panicked: %v", ErrContract, call, p)
	}
}

// Contender is a Lock under test, as a run's Backend: each mode it is
// opened for gets a Lock of its own from New. It is restarted only if it
// says how (OnRestart).
type Contender struct {
	// Info says what the contender is, for the history header; its Name
	// is each mode's the backend is opened for (the contender's name, as
	// a run's modes name their contenders). Info.Generations, if set, is how its leases are
	// numbered (GenerationsFence, ...): a lease that is numbered
	// otherwise fails its acquire.
	Info history.Contender
	// New makes the lock a mode's agents call. A lock that is an
	// io.Closer is closed with the backend.
	New func(ctx context.Context, mode history.Mode) (Lock, error)
	// OnClose, if set, stops what the contender started (its server),
	// after its locks are closed.
	OnClose func() error
	// Share, if set, is what another process needs to reach the
	// contender's servers, for the ContenderAttacher registered under its
	// name: agents run as processes open its lock in each.
	Share string
	// OnRestart, if set, is what a scenario's coordinator restart does
	// to the contender's servers (Restart); nil refuses it. RestartTarget
	// names what it restarts, in the history's fault events.
	OnRestart     func(ctx context.Context, persist bool) error
	RestartTarget string
	// RestartEndsLeases says that OnRestart ends every lease the lock
	// granted (the server drops the sessions its locks live in, as
	// PostgreSQL drops a session's advisory locks), so that the mode's
	// history records the restart as its coordinator's too: a grant after
	// it took over from leases the server ended, not from live ones.
	RestartEndsLeases bool

	mu    sync.Mutex
	locks []Lock
}

// Name implements Backend: the contender's name.
func (c *Contender) Name() string { return string(c.Info.Name) }

// Open implements Backend.
func (c *Contender) Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	if c.New == nil {
		return nil, fmt.Errorf("realtime: contender %s has no lock", c.Info.Name)
	}
	l, err := c.New(ctx, mode)
	if err != nil {
		return nil, err
	}
	svc := newLockService(l, clock, ttl, c.Info.Generations)
	c.mu.Lock()
	c.locks = append(c.locks, l)
	c.mu.Unlock()
	return func() leasefence.Service { return svc }, nil
}

// ContenderOpener starts a contender's server (with its temporary files
// under dir, "" for the system's) and returns the contender: a library
// contender's adapter registers one under its registry name
// (registry.SetOpener). Closing the contender stops what it started.
type ContenderOpener func(ctx context.Context, dir string) (*Contender, error)

// RegisterLockPair registers a library's lock as its two contenders,
// name(false) holding it naive and name(true) writing through the gate
// with its fence: open starts the lock's servers (ContenderOpener),
// attach reaches them from an agent's process (ContenderAttacher).
func RegisterLockPair(name func(fenced bool) string,
	open func(ctx context.Context, dir string, fenced bool) (*Contender, error),
	attach func(share string, fenced bool) (*Contender, error)) {
	for _, fenced := range []bool{false, true} {
		registry.SetOpener(registry.Contenders, name(fenced), ContenderOpener(func(ctx context.Context, dir string) (*Contender, error) {
			return open(ctx, dir, fenced)
		}))
		registry.SetOpener(registry.Contenders, name(fenced), ContenderAttacher(func(_ context.Context, share string) (*Contender, error) {
			return attach(share, fenced)
		}))
	}
}

// ContenderBeside opens a contender on the run's own backend's server in
// place of one of its own, when backend has one its lock can use (redsync
// on the Redis backend's Redis, its Sentinel topology included): the
// backend's faults then strike the contender's lock as they strike the
// lab's. ok is false when backend has none; the contender's
// ContenderOpener then starts its own. A library contender's adapter
// registers one beside its ContenderOpener (registry.SetOpener). Closing
// the contender closes what it opened, never the backend's server.
type ContenderBeside func(ctx context.Context, backend Backend) (c *Contender, ok bool, err error)

// ErrNoRestart: a contender's lock is not the lab's to restart (it has no
// OnRestart).
var ErrNoRestart = errors.New("realtime: a contender's lock cannot be restarted by the lab")

// Restart implements Backend: OnRestart, or ErrNoRestart without one.
func (c *Contender) Restart(ctx context.Context, persist bool) error {
	if c.OnRestart == nil {
		return ErrNoRestart
	}
	return c.OnRestart(ctx, persist)
}

// Close implements Backend: it closes the locks that are io.Closers.
func (c *Contender) Close() error {
	c.mu.Lock()
	locks, onClose := c.locks, c.OnClose
	c.locks, c.OnClose = nil, nil
	c.mu.Unlock()
	var errs []error
	for _, l := range locks {
		if cl, ok := l.(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
	}
	if onClose != nil {
		errs = append(errs, onClose())
	}
	return errors.Join(errs...)
}

// checkLocks refuses sc for the locks under test of a run, as
// registry.CheckLock says: backend if it is a Contender, for each of
// modes, and each of locks (Options.Contenders). lab run has refused it
// already for a library's contender (registry.CheckContenders); a user's
// lock under labtest comes here with no other check.
func checkLocks(sc spec.Scenario, backend Backend, modes []history.Mode, locks map[history.Mode]*Contender) error {
	for _, m := range modes {
		if _, ok := backend.(*Contender); !ok && locks[m] == nil {
			continue
		}
		if err := registry.CheckLock(string(m), sc); err != nil {
			return fmt.Errorf("realtime: %w", err)
		}
	}
	return nil
}

// contenders is what the header says of the contender in each of modes
// (each named by its mode).
func (c *Contender) contenders(modes []history.Mode) []history.Contender {
	var out []history.Contender
	for _, m := range modes {
		info := c.Info
		info.Name = m
		out = append(out, info)
	}
	return out
}
