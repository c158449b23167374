package realtime_test

import (
	"context"
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
// writes for 3 ms, then raises the floor, so the check and the write are
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
	time.Sleep(3 * time.Millisecond) // the write
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

// races is a scenario of pairs of writes on a resource each, the holder
// whose lease lapsed writing a millisecond after the new holder:
// concurrent commits, which a gate must order by its floor.
func races(pairs int) spec.Scenario {
	sc := spec.Scenario{Name: "races", Seed: 1, Duration: 1500 * time.Millisecond, Agents: 2 * pairs, Resources: pairs,
		TTL: time.Second, Agent: spec.Behaviour{WritesPerLease: 1}}
	for p := range pairs {
		old, cur, res := spec.AgentName(2*p), spec.AgentName(2*p+1), spec.ResourceName(p)
		sc.Script = append(sc.Script,
			spec.Action{At: 0, Agent: old, Do: spec.ActAcquire, Resource: res},
			spec.Action{At: 900 * time.Millisecond, Agent: old, Do: spec.ActCheck},
			spec.Action{At: 1100 * time.Millisecond, Agent: cur, Do: spec.ActAcquire, Resource: res},
			spec.Action{At: 1200 * time.Millisecond, Agent: cur, Do: spec.ActCheck},
			spec.Action{At: 1200 * time.Millisecond, Agent: cur, Do: spec.ActWrite},
			spec.Action{At: 1201 * time.Millisecond, Agent: old, Do: spec.ActWrite},
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
