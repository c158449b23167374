package realtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// The lab's power is how fast it finds a broken system. Each mutant below
// is a gate or a coordinator broken one way, plugged in through the
// runner's public Store and Backend seams, and the lab must catch each by
// the rules of its checker over the history alone (no test here knows
// what the mutant does wrong), within a bounded run: a few seeds of a few
// seconds. A correct gate and coordinator on the same scenarios break no
// rule (TestMutantControls).

// gateFlaw is how a mutant gate is broken.
type gateFlaw int

const (
	flawNone         gateFlaw = iota
	flawStringFloor           // compares fences as strings: "10" < "9"
	flawRefusedWrite          // refuses, and writes all the same
	flawNoopAdmit             // Admit (the coordinator's push) does nothing
	flawCheckThenSet          // checks the floor, then writes and raises it 3 ms later
	flawLeaseRepeat           // checks the lease too, and takes a holder's second write for its lease's lapse
)

// checkThenSetGap is the mutant check-then-set gate's gap between its
// check and its write: narrow, as a real one's would be.
const checkThenSetGap = 3 * time.Millisecond

// mutantStore makes gates with one flaw.
type mutantStore struct{ flaw gateFlaw }

func (s mutantStore) Name() string { return "mutant" }
func (mutantStore) Close() error   { return nil }
func (s mutantStore) Resource(_ context.Context, _ history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
	return &mutantGate{flaw: s.flaw, name: name, now: now}, nil
}

// mutantGate is a gate whose check, write and record are one operation
// under its lock, but for its flaw.
type mutantGate struct {
	flaw   gateFlaw
	name   string
	now    func() time.Duration
	mu     sync.Mutex
	floor  leasefence.Token
	record []realtime.Landing
}

// below reports whether fence f is below the floor, as the gate compares.
func (g *mutantGate) below(f leasefence.Fence) bool {
	if g.flaw == flawStringFloor {
		return strconv.FormatUint(uint64(f), 10) < strconv.FormatUint(uint64(g.floor.Fence), 10)
	}
	return f < g.floor.Fence
}

// refusal is the gate's answer to t, or nil to admit it.
func (g *mutantGate) refusal(t leasefence.Token) error {
	switch {
	case g.below(t.Fence):
		return &leasefence.StaleFenceError{Rejection: leasefence.Rejection{Resource: g.name, Holder: t.Holder, Fence: t.Fence,
			FloorHolder: g.floor.Holder, FloorFence: g.floor.Fence}}
	case t.Fence == g.floor.Fence && t.Holder != g.floor.Holder && g.floor.Holder != "":
		return leasefence.ErrTokenConflict
	case g.flaw == flawLeaseRepeat && t == g.floor:
		return &realtime.LeaseRefusedError{Floor: g.floor, Err: errors.New("the lease is not live")}
	}
	return nil
}

func (g *mutantGate) land(t leasefence.Token, id uint64) {
	g.record = append(g.record, realtime.Landing{ID: id, At: g.now()})
	if t.Fence > g.floor.Fence {
		g.floor = t
	}
}

func (g *mutantGate) Commit(_ context.Context, t leasefence.Token, id uint64) error {
	g.mu.Lock()
	err := g.refusal(t)
	if err == nil && g.flaw == flawCheckThenSet {
		g.mu.Unlock()
		time.Sleep(checkThenSetGap)
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	if err != nil && g.flaw != flawRefusedWrite {
		return err
	}
	g.land(t, id)
	return err
}

func (g *mutantGate) Write(_ context.Context, t leasefence.Token, id uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.record = append(g.record, realtime.Landing{ID: id, At: g.now()})
	return nil
}

func (g *mutantGate) Landings(context.Context) ([]realtime.Landing, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.record), nil
}

func (g *mutantGate) Admit(_ context.Context, t leasefence.Token) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.flaw == flawNoopAdmit {
		return nil
	}
	if t.Fence < g.floor.Fence {
		return leasefence.ErrStaleFence
	}
	g.floor = t
	return nil
}

func (g *mutantGate) Floor(context.Context) (leasefence.Token, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.floor, nil
}

// coordFlaw is how a mutant coordinator is broken.
type coordFlaw int

const (
	flawReissue       coordFlaw = iota + 1 // every third grant carries the fence of the grant before
	flawReplyDate                          // dates the lease from its reply, which comes replyLag late
	flawHolderRelease                      // releases the holder's live lease on the resource, whatever fence the release names
)

// replyLag is how late the mutant coordinator's replies are, and how much
// longer than its own lease it tells the holder the lease lasts.
const replyLag = 150 * time.Millisecond

// mutantBackend is the in-memory backend with one flaw in its service.
type mutantBackend struct {
	*realtime.Memory
	flaw coordFlaw

	mu     sync.Mutex
	grants int
	last   leasefence.Fence
}

func (b *mutantBackend) Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	svc, err := b.Memory.Open(ctx, mode, clock, ttl)
	if err != nil {
		return nil, err
	}
	return func() leasefence.Service { return mutantService{Service: svc(), b: b} }, nil
}

type mutantService struct {
	leasefence.Service
	b *mutantBackend
}

func (s mutantService) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	out, err := s.Service.Acquire(ctx, req)
	if err != nil || !out.OK {
		return out, err
	}
	switch s.b.flaw {
	case flawReissue:
		s.b.mu.Lock()
		s.b.grants++
		if s.b.grants%3 == 0 && s.b.last > 0 {
			out.Grant.Token.Fence = s.b.last
		}
		s.b.last = out.Grant.Token.Fence
		s.b.mu.Unlock()
	case flawReplyDate:
		time.Sleep(replyLag)
		out.Grant.TTL += replyLag
	}
	return out, nil
}

func (s mutantService) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	if hr, ok := s.Service.(leasefence.HolderReader); ok && s.b.flaw == flawHolderRelease {
		if cur, live, err := hr.Holder(ctx, t.Resource); err == nil && live && cur.Holder == t.Holder {
			return s.Service.Release(ctx, cur)
		}
	}
	return s.Service.Release(ctx, t)
}

func (s mutantService) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	out, err := s.Service.Renew(ctx, req)
	if err == nil && out.OK && s.b.flaw == flawReplyDate {
		time.Sleep(replyLag)
		out.Grant.TTL += replyLag
	}
	return out, err
}

// mutant is one broken system and the scenario the lab hunts it with.
type mutant struct {
	name     string
	store    realtime.Store
	backend  func() realtime.Backend
	scenario func(seed uint64) spec.Scenario
}

// builtin is the named built-in scenario, seeded, cut to d.
func builtin(name string, d time.Duration) func(uint64) spec.Scenario {
	return func(seed uint64) spec.Scenario {
		sc, ok := spec.Builtin(name)
		if !ok {
			panic("no scenario " + name)
		}
		sc.Seed, sc.Duration = seed, d
		return sc
	}
}

// pushedScenario is pushed(pairs), seeded.
func pushedScenario(pairs int) func(uint64) spec.Scenario {
	return func(seed uint64) spec.Scenario {
		sc := pushed(pairs)
		sc.Seed = seed
		return sc
	}
}

// pushed is pairs of holders with the push on and the new holder slow to
// write: the old holder's stalled write reaches the gate after the push of
// the new fence has, and before the new holder's first commit.
func pushed(pairs int) spec.Scenario {
	sc := pairWrites(pairs, 1500*time.Millisecond, 1300*time.Millisecond)
	sc.Name, sc.Push = "pushed", spec.Push{Enabled: true, Delay: spec.Const(time.Millisecond)}
	return sc
}

// lateRelease is pairs of holders each of whom writes, lets its lease
// lapse, sends a release of it at 1100ms and an acquire of the same
// resource a millisecond later, over a network slow enough (1-60ms each
// way) that the release often reaches the coordinator after the new lease
// was granted: a release keyed by the holder's name lets the new lease go.
func lateRelease(pairs int) func(uint64) spec.Scenario {
	return func(seed uint64) spec.Scenario {
		sc := spec.Scenario{Name: "late-release", Seed: seed, Duration: 1500 * time.Millisecond, Agents: pairs, Resources: pairs,
			TTL: time.Second, Agent: spec.Behaviour{WritesPerLease: 1},
			Network: spec.Network{RequestDelay: spec.Uniform(time.Millisecond, 60*time.Millisecond)}}
		for p := range pairs {
			a, res := spec.AgentName(p), spec.ResourceName(p)
			sc.Script = append(sc.Script,
				spec.Action{At: 0, Agent: a, Do: spec.ActAcquire, Resource: res},
				spec.Action{At: 500 * time.Millisecond, Agent: a, Do: spec.ActCheck},
				spec.Action{At: 500 * time.Millisecond, Agent: a, Do: spec.ActWrite},
				spec.Action{At: 1100 * time.Millisecond, Agent: a, Do: spec.ActRelease},
				spec.Action{At: 1101 * time.Millisecond, Agent: a, Do: spec.ActAcquire, Resource: res},
			)
		}
		return sc
	}
}

var mutants = []mutant{
	{name: "floor compared as strings", store: mutantStore{flawStringFloor}, scenario: builtin("crowd", 4*time.Second)},
	{name: "refusal that still writes", store: mutantStore{flawRefusedWrite}, scenario: builtin("overlap", 5*time.Second)},
	{name: "Admit a no-op", store: mutantStore{flawNoopAdmit}, scenario: pushedScenario(4)},
	{name: "check-then-set, 3ms apart", store: mutantStore{flawCheckThenSet}, scenario: builtin("contend", 2*time.Second)},
	{name: "lease refused while live", store: mutantStore{flawLeaseRepeat}, scenario: builtin("overlap", 3*time.Second)},
	{name: "coordinator reissues a fence", backend: func() realtime.Backend { return &mutantBackend{Memory: realtime.NewMemory(), flaw: flawReissue} },
		scenario: builtin("crowd", 3*time.Second)},
	{name: "release keyed by holder name", backend: func() realtime.Backend {
		return &mutantBackend{Memory: realtime.NewMemory(), flaw: flawHolderRelease}
	}, scenario: lateRelease(8)},
	{name: "lease dated from the reply", backend: func() realtime.Backend { return &mutantBackend{Memory: realtime.NewMemory(), flaw: flawReplyDate} },
		scenario: builtin("overlap", 5*time.Second)},
}

// maxMutantSeeds bounds the hunt for each mutant.
const maxMutantSeeds = 5

// TestMutantsAreCaught hunts each mutant, seed after seed, and says how
// long the lab took to catch it: the run's instant of the first evidence,
// and the seeds it took.
func TestMutantsAreCaught(t *testing.T) {
	t.Parallel()
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= maxMutantSeeds; seed++ {
				sc := m.scenario(seed)
				res := runMutant(t, m, sc)
				if !res.Failed() {
					f := res.Modes[history.Fenced]
					t.Logf("seed %d: not caught: %d fences minted, %d admitted, %d refused", seed, f.FencesMinted, f.CommitsAdmitted, f.CommitsRefused)
					continue
				}
				at, kind := firstEvidence(res.Modes[history.Fenced])
				t.Logf("caught %s: seed %d of %d, at %.3fs of a %s run (%s): %s", m.name, seed, maxMutantSeeds, at/1000,
					history.FormatDuration(sc.Duration), kind, strings.Join(res.Violations(), "; "))
				return
			}
			t.Fatalf("the lab did not catch %q in %d seeds", m.name, maxMutantSeeds)
		})
	}
}

// The correct gate and coordinator on each mutant's scenario break no
// rule: what catches a mutant is its flaw.
func TestMutantControls(t *testing.T) {
	t.Parallel()
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ctl := mutant{name: m.name, store: mutantStore{flawNone}, scenario: m.scenario}
			if m.backend != nil {
				ctl.store = realtime.MemoryStore{}
			}
			res := runMutant(t, ctl, m.scenario(1))
			if res.Failed() {
				t.Fatalf("a correct gate and coordinator failed: %q", res.Violations())
			}
			if f := res.Modes[history.Fenced]; f.Vacuous {
				t.Fatalf("the scenario made no write")
			}
		})
	}
}

func runMutant(t *testing.T, m mutant, sc spec.Scenario) *realtime.Result {
	t.Helper()
	opts := realtime.Options{Modes: []history.Mode{history.Fenced}, Store: m.store}
	if m.backend != nil {
		opts.Backend = m.backend()
	}
	r, err := realtime.New(sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// firstEvidence is the earliest counterexample of a kind that breaks a
// rule, in milliseconds of the run, and its kind.
func firstEvidence(r *history.Report) (float64, string) {
	at, kind := -1.0, "no counterexample"
	for _, cx := range r.Counterexamples {
		switch cx.Kind {
		case history.RefusedWrite, history.SilentOverlap:
			continue // evidence of an overlap, not of a broken rule
		}
		if at < 0 || cx.AtMS < at {
			at, kind = cx.AtMS, fmt.Sprint(cx.Kind)
		}
	}
	return at, kind
}
