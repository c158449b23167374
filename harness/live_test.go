package harness

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/spec"

	"github.com/leasefence/lab/history"
)

// fakeWall is a wall clock a test moves by hand.
type fakeWall struct {
	mu sync.Mutex
	t  time.Time
}

func (w *fakeWall) now() time.Time      { w.mu.Lock(); defer w.mu.Unlock(); return w.t }
func (w *fakeWall) add(d time.Duration) { w.mu.Lock(); w.t = w.t.Add(d); w.mu.Unlock() }

func newTestLive(t *testing.T, name string, speed float64) (*Live, *fakeWall) {
	t.Helper()
	sc, _ := spec.Builtin(name)
	l, err := NewLive(sc, nil, speed)
	if err != nil {
		t.Fatal(err)
	}
	w := &fakeWall{t: time.Unix(1_700_000_000, 0)}
	l.now = w.now
	l.wallBase = w.now()
	return l, w
}

func TestLivePacesToWallTime(t *testing.T) {
	l, w := newTestLive(t, "overlap", 10)
	w.add(500 * time.Millisecond)
	l.catchUp()
	if got := l.Now(); got != 5*time.Second {
		t.Fatalf("after 0.5s of wall time at 10x: virtual %v, want 5s", got)
	}
	if err := l.SetSpeed(2); err != nil {
		t.Fatal(err)
	}
	w.add(time.Second)
	l.catchUp()
	if got := l.Now(); got != 7*time.Second {
		t.Fatalf("then 1s at 2x: virtual %v, want 7s", got)
	}
	for _, m := range l.Modes() {
		snap, _ := l.Snapshot(m)
		if snap.Now != 7*time.Second {
			t.Errorf("%s snapshot at %v, want 7s: modes must move in lockstep", m, snap.Now)
		}
	}
}

func TestLivePauseAndStep(t *testing.T) {
	l, w := newTestLive(t, "gap", 1)
	l.SetPaused(true)
	w.add(time.Hour)
	l.catchUp()
	if got := l.Now(); got != 0 {
		t.Fatalf("paused, virtual time moved to %v", got)
	}
	var times []time.Duration
	for l.Step() {
		times = append(times, l.Now())
	}
	if len(times) == 0 {
		t.Fatal("Step fired nothing")
	}
	for i := 1; i < len(times); i++ {
		if times[i] < times[i-1] {
			t.Fatalf("Step went back in time: %v", times)
		}
	}
	if !l.Done() {
		t.Fatal("stepping to the end did not finish the run")
	}
	if f := l.Result().Modes[history.Fenced]; f.CommitsRefused != 1 {
		t.Fatalf("stepped gap run refused %d commits, want 1", f.CommitsRefused)
	}
	l.SetPaused(false)
	if l.Paused() {
		t.Fatal("still paused")
	}
}

func TestLiveSpeedLimits(t *testing.T) {
	l, _ := newTestLive(t, "gap", 1)
	for _, bad := range []float64{0, -1, MaxSpeed * 2} {
		if err := l.SetSpeed(bad); !errors.Is(err, spec.ErrInvalidScenario) {
			t.Errorf("SetSpeed(%v) = %v", bad, err)
		}
	}
	if _, err := NewLive(spec.Scenario{}, nil, 1); err == nil {
		t.Error("NewLive accepted an invalid scenario")
	}
}

// TestLiveInterventionsReplay steers a run by hand, then replays the
// recorded scenario and gets the same run.
func TestLiveInterventionsReplay(t *testing.T) {
	l, _ := newTestLive(t, "overlap", 1)
	l.Advance(3 * time.Second)
	steps := []history.Intervention{
		{Kind: history.StallAgent, Agent: "agent-2", Duration: 3 * time.Second},
		{Kind: history.SetDropRate, Value: 0.3},
		{Kind: history.TogglePush},
		{Kind: history.RestartCoordinator, Persist: true},
	}
	for _, iv := range steps {
		if err := l.Intervene(iv); err != nil {
			t.Fatal(err)
		}
		l.Advance(2 * time.Second)
	}
	if err := l.Intervene(history.Intervention{Kind: history.StallAgent, Agent: "nobody", Duration: time.Second}); !errors.Is(err, spec.ErrInvalidScenario) {
		t.Fatalf("bad intervention: %v", err)
	}
	l.Advance(time.Minute)
	live := l.Result()
	sc := l.Scenario()
	if len(sc.Interventions) != len(steps) {
		t.Fatalf("recorded %d interventions, want %d", len(sc.Interventions), len(steps))
	}
	replay, err := Run(t.Context(), sc, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if replay.Digest != live.Digest {
		t.Fatalf("replay digest %s, steered run %s", replay.Digest, live.Digest)
	}
}

func TestLiveRunStopsWithContext(t *testing.T) {
	before := runtime.NumGoroutine()
	sc, _ := spec.Builtin("crowd")
	l, err := NewLive(sc, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- l.Run(ctx, time.Millisecond) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	noLeak(t, before)
}

func TestLiveRunFinishes(t *testing.T) {
	sc, _ := spec.Builtin("gap")
	l, err := NewLive(sc, nil, MaxSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(t.Context(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !l.Done() {
		t.Fatal("Run returned before the end")
	}
}

func TestSnapshotShowsTheOverlap(t *testing.T) {
	l, _ := newTestLive(t, "gap", 1)
	l.Advance(1200 * time.Millisecond)
	snap, _ := l.Snapshot(history.Fenced)
	if snap.Agents[0].State != history.AgentZombie {
		t.Errorf("agent-1 at 1.2s is %v, want %v (stalled past its coordinator expiry)", snap.Agents[0].State, history.AgentZombie)
	}
	if h := snap.Holders[0]; h.Holder != "agent-2" || h.Fence != 2 || h.CoordinatorLeft != 800*time.Millisecond {
		t.Errorf("holder view %+v", h)
	}
	l.Advance(300 * time.Millisecond)
	snap, _ = l.Snapshot(history.Fenced)
	if len(snap.Refusals) != 1 || snap.Refusals[0].At != 1400*time.Millisecond || snap.Refusals[0].FloorHolder != "agent-2" {
		t.Fatalf("refusals %+v", snap.Refusals)
	}
	if g := snap.Gates[0]; g.FloorFence != 2 || g.Refused != 1 || g.Admitted != 1 {
		t.Errorf("gate view %+v", g)
	}
	lane := snap.Lanes[0]
	var sawZombie, sawRefused bool
	for _, s := range lane.Segments {
		sawZombie = sawZombie || s.State == history.AgentZombie
	}
	for _, m := range lane.Marks {
		sawRefused = sawRefused || m.Kind == history.MarkRefused
	}
	if !sawZombie || !sawRefused {
		t.Errorf("agent-1's lane %+v lacks the believes-expired stretch or the refused write", lane)
	}
	naive, _ := l.Snapshot(history.Naive)
	if naive.Gates != nil || naive.Totals.StaleWritesLanded != 1 {
		t.Errorf("naive snapshot: gates %v, stale %d", naive.Gates, naive.Totals.StaleWritesLanded)
	}
}

func TestSwarm(t *testing.T) {
	before := runtime.NumGoroutine()
	sc, _ := spec.Builtin("crowd")
	sc.Duration = 10 * time.Second
	var calls int
	var mu sync.Mutex
	opts := SwarmOptions{Seeds: 24, FirstSeed: 100, Jobs: 3, Progress: func(done, total int) {
		mu.Lock()
		calls++
		mu.Unlock()
	}}
	a, err := Swarm(t.Context(), sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 24 || a.Seeds != 24 {
		t.Fatalf("progress calls %d, seeds %d", calls, a.Seeds)
	}
	if len(a.Failures) != 0 {
		t.Fatalf("fenced failures: %+v", a.Failures)
	}
	if a.NaiveStaleWrites == 0 || a.FencedRefusals == 0 {
		t.Fatalf("swarm found no stale naive writes (%d) or fenced refusals (%d)", a.NaiveStaleWrites, a.FencedRefusals)
	}
	opts.Jobs, opts.Progress = 1, nil
	b, err := Swarm(t.Context(), sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if a.Events != b.Events || a.NaiveStaleWrites != b.NaiveStaleWrites || a.FencedRefusals != b.FencedRefusals {
		t.Fatalf("swarm depends on its job count: %+v vs %+v", a, b)
	}
	noLeak(t, before)
}

func TestSwarmScenarioIsValidAndSeeded(t *testing.T) {
	base, _ := spec.Builtin("crowd")
	for seed := uint64(1); seed <= 200; seed++ {
		sc := SwarmScenario(base, DefaultSwarmRanges, seed)
		if err := sc.Validate(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if sc.Seed != seed {
			t.Fatalf("seed %d: scenario seed %d", seed, sc.Seed)
		}
	}
	a := SwarmScenario(base, DefaultSwarmRanges, 7)
	b := SwarmScenario(base, DefaultSwarmRanges, 7)
	if a.Network != b.Network || a.ClockSkew != b.ClockSkew || len(a.Restarts) != len(b.Restarts) {
		t.Fatal("the same seed drew different knobs")
	}
}

func TestSwarmCancelled(t *testing.T) {
	sc, _ := spec.Builtin("crowd")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := Swarm(ctx, sc, SwarmOptions{Seeds: 10})
	if !errors.Is(err, context.Canceled) || res == nil {
		t.Fatalf("Swarm = %v, %v", res, err)
	}
}

// noLeak fails if more goroutines run than before, once those that are
// finishing (a test's context watcher, a ticker) have had time to end.
func noLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := runtime.NumGoroutine()
		if after <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An acquire sent on a lossless network has no retry timer; raising the
// drop rate while it is in flight must not leave its agent waiting forever.
func TestDropRateRaisedMidFlight(t *testing.T) {
	sc, _ := spec.Builtin("overlap")
	var last history.Event
	sent := map[int]time.Duration{}
	sim, err := NewSim(sc, history.Fenced, history.SubscriberFunc(func(e history.Event) {
		last = e
		if e.Kind == history.RequestSent {
			sent[e.Agent] = e.At
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	for sim.Step() && !(last.Kind == history.RequestSent && last.Request == "acquire") {
	}
	agent, at := last.Agent, last.At
	if err := sim.Intervene(history.Intervention{Kind: history.SetDropRate, Value: 1}); err != nil {
		t.Fatal(err)
	}
	sim.RunUntil(at + 10*sc.TTL)
	if sent[agent] <= at {
		t.Fatalf("%s sent nothing after its acquire at %v was cut off", spec.AgentName(agent), at)
	}
}
