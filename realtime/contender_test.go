package realtime_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// flipLock grants every Acquire, its leases alternately with a fence and
// without one: a lock that is not one thing or the other.
type flipLock struct {
	mu sync.Mutex
	n  uint64
}

type flipLease struct {
	n        uint64
	fence    bool
	deadline time.Time
}

func (l *flipLock) Acquire(_ context.Context, _, _ string, ttl time.Duration) (realtime.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return &flipLease{n: l.n, fence: l.n%2 == 1, deadline: time.Now().Add(ttl / 2)}, nil
}

func (f *flipLease) Deadline() time.Time           { return f.deadline }
func (f *flipLease) Fence() (uint64, bool)         { return f.n, f.fence }
func (f *flipLease) Renew(context.Context) error   { return nil }
func (f *flipLease) Release(context.Context) error { return nil }

// heldLock is held by someone else, always.
type heldLock struct{}

func (heldLock) Acquire(context.Context, string, string, time.Duration) (realtime.Lease, error) {
	return nil, fmt.Errorf("somebody has it: %w", realtime.ErrHeld)
}

func runContender(t *testing.T, lock realtime.Lock, info history.Contender) (*realtime.Result, history.Header) {
	t.Helper()
	sc, _ := spec.Builtin("overlap")
	sc.Duration = time.Second
	c := &realtime.Contender{Info: info, New: func(context.Context, history.Mode) (realtime.Lock, error) { return lock, nil }}
	r, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{info.Name}, Backend: c})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return res, r.Header()
}

func TestContenderHeaderAndRefusals(t *testing.T) {
	res, h := runContender(t, &flipLock{}, history.Contender{Name: "flip", Discipline: history.DisciplineNaive})
	if c := h.Contender("flip"); c.Discipline != history.DisciplineNaive || h.Backend != "flip" || len(h.Contenders) != 1 {
		t.Errorf("header: backend %q, contenders %+v", h.Backend, h.Contenders)
	}
	// The second lease is numbered otherwise than the first: the run
	// says so, as an error of the library's.
	if !strings.Contains(strings.Join(res.Violations(), "\n"), "numbered by fence and by observed") || !res.Failed() {
		t.Errorf("a lock with and without a fence: violations %q", res.Violations())
	}
	// A lock that is always held grants nothing, and denies every acquire.
	res, _ = runContender(t, heldLock{}, history.Contender{Name: "held", Discipline: history.DisciplineNaive})
	rep := res.Modes["held"]
	if rep.Acquisitions != 0 || rep.Denials == 0 || len(rep.Violations) != 0 {
		t.Errorf("held: %d acquisitions, %d denials, violations %q", rep.Acquisitions, rep.Denials, rep.Violations)
	}
}

// One run compares the lab's own fenced lease, on the backend's
// coordinator, with a contender's lock beside it (Options.Contenders):
// each mode calls its own, the header describes the contender, and a
// restart of the lab's coordinator is recorded only where it happened.
func TestContendersBesideTheBackend(t *testing.T) {
	sc, _ := spec.Builtin("overlap")
	sc.Duration = time.Second
	sc.Restarts = []spec.Restart{{At: 500 * time.Millisecond, Persist: true}}
	held := &realtime.Contender{Info: history.Contender{Name: "held", Library: "test", Discipline: history.DisciplineNaive},
		New: func(context.Context, history.Mode) (realtime.Lock, error) { return heldLock{}, nil }}
	var mu sync.Mutex
	restarts := map[history.Mode]int{}
	r, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{history.Fenced, "held"}, Backend: realtime.NewMemory(),
		Contenders: map[history.Mode]*realtime.Contender{"held": held},
		Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Kind == history.CoordinatorRestarted {
				restarts[e.Mode]++
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if c := h.Contender("held"); c.Library != "test" || h.Backend != registry.Memory || len(h.Contenders) != 1 {
		t.Errorf("header: backend %q, contenders %+v", h.Backend, h.Contenders)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	f, l := res.Modes[history.Fenced], res.Modes["held"]
	if f.Acquisitions == 0 || l.Acquisitions != 0 || l.Denials == 0 {
		t.Errorf("fenced: %d acquisitions; held: %d acquisitions, %d denials: each mode must call its own lock", f.Acquisitions, l.Acquisitions, l.Denials)
	}
	if restarts[history.Fenced] != 1 || restarts["held"] != 0 {
		t.Errorf("restarts recorded %v: want the lab's coordinator's alone", restarts)
	}
	if _, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{history.Fenced}, Contenders: map[history.Mode]*realtime.Contender{"held": held}}); err == nil {
		t.Error("a contender for a mode the run does not run was taken")
	}
}

// A contender that says how to restart (redlock restarts one of its
// servers) plays the scenario's restarts, each recorded in its own mode as
// a restart fault on what it restarted, and no coordinator restart there.
func TestContenderPlaysRestarts(t *testing.T) {
	sc, _ := spec.Builtin("overlap")
	sc.Duration = time.Second
	sc.Restarts = []spec.Restart{{At: 500 * time.Millisecond}}
	var played atomic.Int32
	held := &realtime.Contender{Info: history.Contender{Name: "held", Library: "test", Discipline: history.DisciplineNaive},
		New:           func(context.Context, history.Mode) (realtime.Lock, error) { return heldLock{}, nil },
		OnRestart:     func(context.Context, bool) error { played.Add(1); return nil },
		RestartTarget: "held's server"}
	var mu sync.Mutex
	var faults, restarts []history.Event
	r, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{"held"}, Backend: realtime.NewMemory(),
		Contenders: map[history.Mode]*realtime.Contender{"held": held},
		Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case history.FaultBegan:
				faults = append(faults, e)
			case history.CoordinatorRestarted:
				restarts = append(restarts, e)
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if played.Load() != 1 || len(faults) != 1 || faults[0].Fault != string(spec.FaultRestart) || faults[0].Target != "held's server" || len(restarts) != 0 {
		t.Errorf("restarts played %d; faults %+v, coordinator restarts %+v: want one restart of held's server", played.Load(), faults, restarts)
	}
}
