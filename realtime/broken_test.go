package realtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// checkThenSet is a deliberately broken store: its gate checks the floor,
// writes for 30 ms, then raises the floor, so the check and the write are
// not one operation. Its record of landings is kept as a real resource's
// would be, appended as each write lands.
type checkThenSet struct{}

func (checkThenSet) Name() string { return "check-then-set" }
func (checkThenSet) Close() error { return nil }
func (checkThenSet) Resource(_ context.Context, _ history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
	return &brokenGate{name: name, now: now}, nil
}

type brokenGate struct {
	name   string
	now    func() time.Duration
	mu     sync.Mutex
	floor  leasefence.Token
	record []realtime.Landing
}

func (g *brokenGate) Commit(_ context.Context, t leasefence.Token, id uint64) error {
	g.mu.Lock()
	floor := g.floor
	g.mu.Unlock()
	if t.Fence < floor.Fence {
		return &leasefence.StaleFenceError{Rejection: leasefence.Rejection{Resource: g.name, Holder: t.Holder, Fence: t.Fence,
			FloorHolder: floor.Holder, FloorFence: floor.Fence}}
	}
	time.Sleep(brokenWrite) // the write
	g.mu.Lock()
	defer g.mu.Unlock()
	g.record = append(g.record, realtime.Landing{ID: id, At: g.now()})
	if t.Fence > g.floor.Fence {
		g.floor = t
	}
	return nil
}

func (g *brokenGate) Write(ctx context.Context, t leasefence.Token, id uint64) error {
	return g.Commit(ctx, t, id)
}

func (g *brokenGate) Landings(context.Context) ([]realtime.Landing, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]realtime.Landing(nil), g.record...), nil
}

func (g *brokenGate) Admit(_ context.Context, t leasefence.Token) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.Fence > g.floor.Fence {
		g.floor = t
	}
	return nil
}

func (g *brokenGate) Floor(context.Context) (leasefence.Token, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.floor, nil
}

// brokenWrite is how long the broken gate's write takes between its check
// and its raise of the floor.
const brokenWrite = 200 * time.Millisecond

// races is a scenario of pairs of writes on a resource each, the holder
// whose lease lapsed writing 50 ms after the new holder: concurrent
// commits, which a gate must order by its floor. The 50 ms outlast the
// jitter of a loaded machine's timers and a stall of the whole process (at
// 10 ms apart, a run under load once started all four old writes first),
// so the old holder's write starts second, and fall well inside the broken
// gate's 200 ms write, so it checks the floor before the new holder's
// write has raised it.
func races(pairs int) spec.Scenario {
	return pairWrites(pairs, 1200*time.Millisecond, 1250*time.Millisecond)
}

// pairWrites is pairs of holders on a resource each: the old one acquires
// at 0 and checks at 900ms, its lease lapses at 1s, the new one acquires
// at 1100ms; the new one checks and writes at cur, the old one writes at
// old. The run ends 300ms after the later write.
func pairWrites(pairs int, cur, old time.Duration) spec.Scenario {
	sc := spec.Scenario{Name: "races", Seed: 1, Duration: max(cur, old) + 300*time.Millisecond, Agents: 2 * pairs, Resources: pairs,
		TTL: time.Second, Agent: spec.Behaviour{WritesPerLease: 1}}
	for p := range pairs {
		o, c, res := spec.AgentName(2*p), spec.AgentName(2*p+1), spec.ResourceName(p)
		sc.Script = append(sc.Script,
			spec.Action{At: 0, Agent: o, Do: spec.ActAcquire, Resource: res},
			spec.Action{At: 900 * time.Millisecond, Agent: o, Do: spec.ActCheck},
			spec.Action{At: 1100 * time.Millisecond, Agent: c, Do: spec.ActAcquire, Resource: res},
			spec.Action{At: cur, Agent: c, Do: spec.ActCheck},
			spec.Action{At: cur, Agent: c, Do: spec.ActWrite},
			spec.Action{At: old, Agent: o, Do: spec.ActWrite},
		)
	}
	return sc
}

// The real-time runner lets writes reach a gate concurrently and reads the
// landings from the resource's own record: the broken check-then-set gate
// lands stale writes, and the run says so; the in-memory gate, whose check
// and write are one operation, lands none.
func TestBrokenGateIsCaught(t *testing.T) {
	t.Parallel()
	sc := races(4)
	for _, tc := range []struct {
		store realtime.Store
		stale bool
	}{{checkThenSet{}, true}, {realtime.MemoryStore{}, false}} {
		t.Run(tc.store.Name(), func(t *testing.T) {
			t.Parallel()
			r, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{history.Fenced}, Store: tc.store})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			f := res.Modes[history.Fenced]
			if got := f.StaleWritesLanded > 0; got != tc.stale {
				t.Fatalf("%s: %d stale writes landed (%d admitted, %d refused), want stale %v",
					tc.store.Name(), f.StaleWritesLanded, f.CommitsAdmitted, f.CommitsRefused, tc.stale)
			}
			if tc.stale && !res.Failed() {
				t.Errorf("the broken gate's run did not fail: %s", fmt.Sprint(res.Violations()))
			}
		})
	}
}

// failingStore is the in-memory store with a failing wire in front of
// its resources: every third write lands and its answer is lost (the
// store's error comes back instead), and every third one after that is
// lost before it lands. Neither writer can know what became of its write;
// the resource's record can.
type failingStore struct{ realtime.MemoryStore }

func (s failingStore) Resource(ctx context.Context, mode history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
	res, err := s.MemoryStore.Resource(ctx, mode, name, now)
	return &failingResource{Resource: res}, err
}

var errTimedOut = errors.New("store: request timed out")

type failingResource struct {
	realtime.Resource
	mu     sync.Mutex
	writes int
}

// fail makes the write through do, or fails it before or after.
func (r *failingResource) fail(do func() error) error {
	r.mu.Lock()
	r.writes++
	n := r.writes
	r.mu.Unlock()
	switch n % 6 {
	case 3: // lost on the way back: it landed
		if err := do(); err != nil {
			return err
		}
		return errTimedOut
	case 0: // lost on the way there
		return errTimedOut
	}
	return do()
}

func (r *failingResource) Commit(ctx context.Context, t leasefence.Token, id uint64) error {
	return r.fail(func() error { return r.Resource.Commit(ctx, t, id) })
}

func (r *failingResource) Write(ctx context.Context, t leasefence.Token, id uint64) error {
	return r.fail(func() error { return r.Resource.Write(ctx, t, id) })
}

// A write the store fails is the store's failure, not the library's: the
// agent records it, gives up its lease and goes on, and the verdict reads
// from the resource's record which of those writes landed.
func TestStoreFailingWritesIsNoLibraryError(t *testing.T) {
	t.Parallel()
	sc, ok := spec.Builtin("overlap")
	if !ok {
		t.Fatal("no overlap scenario")
	}
	// The first write fails at 1.1-1.9s, the next lease 0.2-1s later
	// (20 runs at a load of 2-7): 5s leaves 2s past the latest.
	sc.Duration = 5 * time.Second
	var events []history.Event
	r, err := realtime.New(sc, realtime.Options{Store: failingStore{},
		Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) { events = append(events, e) })}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Violations(); len(v) > 0 {
		t.Fatalf("violations: %q", v)
	}
	for _, m := range []history.Mode{history.Naive, history.Fenced} {
		rep := res.Modes[m]
		attempts := rep.CommitsAdmitted + rep.CommitsRefused
		if rep.WritesFailed == 0 || attempts < 2*rep.WritesFailed {
			t.Errorf("%s: %d writes failed beside %d landed or refused: want some, and every third write made", m, rep.WritesFailed, attempts)
		}
		if failed, next := wentOn(events, m); next < 0 {
			t.Errorf("%s: no lease acquired after the first failed write (at %v): the agents did not go on", m, failed)
		} else {
			t.Logf("%s: the first failed write at %v, the next lease acquired %v later", m, failed, next-failed)
		}
	}
	for _, e := range events {
		if e.Kind == history.WriteFailed && e.Detail != "Write: "+errTimedOut.Error() && e.Detail != "Commit: "+errTimedOut.Error() {
			t.Fatalf("write_failed detail %q does not name the call and the store's error", e.Detail)
		}
	}
}

// wentOn returns when mode m's first write failed, and when a lease was
// next acquired (-1 for never). The next lease, not a count of them: the
// last failed write of a run can come too late for another lease, and
// under load one of 18 runs of the package ended so (3 leases, 3 failed writes).
func wentOn(events []history.Event, m history.Mode) (failed, next time.Duration) {
	failed, next = -1, -1
	for _, e := range events {
		switch {
		case e.Mode != m:
		case e.Kind == history.WriteFailed && failed < 0:
			failed = e.At
		case e.Kind == history.Acquired && failed >= 0:
			return failed, e.At
		}
	}
	return failed, next
}

// unloggedGate refuses every write, and cannot log one.
type unloggedGate struct{ brokenGate }

func (g *unloggedGate) Commit(_ context.Context, t leasefence.Token, _ uint64) error {
	return &leasefence.RefusalNotLoggedError{Rejection: leasefence.Rejection{Resource: g.name, Holder: t.Holder, Fence: t.Fence,
		FloorHolder: "agent-2", FloorFence: t.Fence + 1}, Err: errTimedOut}
}

// A refusal the gate could not log is still a refusal, by the floor the
// gate named: in the history it is a commit_refused that says it was not
// logged, never a store failure or a landing.
func TestRefusalNotLoggedIsARefusal(t *testing.T) {
	t.Parallel()
	tok := leasefence.Token{Resource: "res-1", Holder: "agent-1", Fence: 4}
	fate, call, err := realtime.Land(t.Context(), &unloggedGate{brokenGate{name: "res-1"}}, history.DisciplineFenced, tok, 1)
	if err != nil || call != "" {
		t.Fatalf("Land = %v (call %q), want a refusal", err, call)
	}
	want := realtime.Fate{Floor: leasefence.Token{Holder: "agent-2", Fence: 5}, NotLogged: true}
	if fate != want {
		t.Fatalf("Land = %+v, want %+v", fate, want)
	}
	e := fate.Refusal(history.Event{Agent: 0, Resource: 0, Fence: 4}, []string{"agent-1", "agent-2"})
	if e.Kind != history.CommitRefused || e.Other != 1 || e.OtherFence != 5 || e.Outcome != history.OutcomeRefusalNotLogged {
		t.Fatalf("refusal event %+v: want commit_refused by agent-2@5, outcome %s", e, history.OutcomeRefusalNotLogged)
	}
}

// floorlessGate refuses every write, cannot log one, and never read the
// floor that refused it.
type floorlessGate struct{ brokenGate }

func (g *floorlessGate) Commit(_ context.Context, t leasefence.Token, _ uint64) error {
	return &leasefence.RefusalNotLoggedError{Rejection: leasefence.Rejection{Resource: g.name, Holder: t.Holder, Fence: t.Fence}, Err: errTimedOut}
}

// A refusal the gate could not log, naming no floor (it failed before it
// read one), is a failure of the store's to the agent, not a refusal the
// history would record by a floor of 0 that nothing raised and the
// checker would find unexplained: the resource's record says the write
// did not land.
func TestRefusalNamingNoFloorIsAStoreFailure(t *testing.T) {
	t.Parallel()
	tok := leasefence.Token{Resource: "res-1", Holder: "agent-1", Fence: 4}
	fate, call, err := realtime.Land(t.Context(), &floorlessGate{brokenGate{name: "res-1"}}, history.DisciplineFenced, tok, 1)
	if !errors.Is(err, leasefence.ErrRefusalNotLogged) || call != "Commit" || fate != (realtime.Fate{}) {
		t.Fatalf("Land = %+v, %v (call %q), want the store's failure of Commit", fate, err, call)
	}
}
