package realtime_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// decisions is what an agent decided in one run, as its history shows.
type decisions struct {
	picks      [][]int // per agent: the resource of each fresh acquire, in order
	granted    int     // fences minted
	pushes     int     // pushes of a minted fence, applied or lost
	acquired   int
	landed     int // writes that landed
	retries    int // acquires resent after no reply
	lostAcq    int // acquire requests or replies lost
	stallsSeen int
}

func (d *decisions) add(e history.Event, seen map[string]bool) {
	switch e.Kind {
	case history.RequestSent:
		if e.Request == history.RequestAcquire && !seen[e.RequestID] {
			seen[e.RequestID] = true
			d.picks[e.Agent] = append(d.picks[e.Agent], e.Resource)
		}
	case history.Granted:
		d.granted++
	case history.AdmitPushed, history.PushDropped:
		d.pushes++
	case history.Acquired:
		d.acquired++
	case history.CommitAdmitted, history.WriteLanded:
		d.landed++
	case history.RequestRetried:
		d.retries++
	case history.RequestDropped, history.ReplyDropped:
		if e.Request == history.RequestAcquire {
			d.lostAcq++
		}
	case history.StallBegan:
		d.stallsSeen++
	}
}

// collector folds a run's events into its decisions; safe for the
// real-time runner's goroutines.
type collector struct {
	mu   sync.Mutex
	d    decisions
	seen map[string]bool
}

func newCollector(agents int) *collector {
	return &collector{d: decisions{picks: make([][]int, agents)}, seen: map[string]bool{}}
}

func (c *collector) Event(e history.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d.add(e, c.seen)
}

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// near reports whether two proportions agree within tolerance tol (an
// absolute difference, or a relative one for large values).
func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol || math.Abs(a-b) <= tol*math.Max(a, b)
}

// Every built-in scenario on both drivers of the one agent: the simulator
// on virtual time, and the real-time runner on the in-memory coordinator
// at a tenth of its times. The same seed makes the same decisions in the
// same proportions: the same pick sequence for every agent (as far as both
// ran), each minted fence pushed once, the same writes per lease and
// retries per lost acquire message, within a tolerance only where the
// real time must differ (what a lease meets depends on when things
// happen).
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	t.Parallel()
	for _, name := range spec.BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc, _ := spec.Builtin(name)
			sc.Duration = min(sc.Duration, 30*time.Second)
			sc = realtime.Scale(sc, 0.1)
			modes := []history.Mode{history.Fenced}

			sim := newCollector(sc.Agents)
			if _, err := harness.Run(context.Background(), sc, harness.RunOptions{Modes: modes, Subscribers: []history.Subscriber{sim}}); err != nil {
				t.Fatal(err)
			}
			real := newCollector(sc.Agents)
			r, err := realtime.New(sc, realtime.Options{Modes: modes, Subscribers: []history.Subscriber{real}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			compare(t, &sc, &sim.d, &real.d)
		})
	}
}

func compare(t *testing.T, sc *spec.Scenario, sim, real *decisions) {
	t.Helper()
	for i := range sim.picks {
		n := min(len(sim.picks[i]), len(real.picks[i]))
		if !slices.Equal(sim.picks[i][:n], real.picks[i][:n]) {
			t.Errorf("agent %d picks: simulator %v, real time %v", i, sim.picks[i][:n], real.picks[i][:n])
		}
	}
	if sc.Push.Enabled {
		// Every fence is pushed when it is minted, whatever becomes of its
		// reply; one minted in the run's last moments may not have
		// arrived by its end.
		for name, d := range map[string]*decisions{"simulator": sim, "real time": real} {
			if d.pushes > d.granted || d.granted-d.pushes > 2 {
				t.Errorf("%s: %d pushes of %d minted fences", name, d.pushes, d.granted)
			}
		}
	}
	checks := []struct {
		what      string
		sim, real float64
		tol       float64
	}{
		{"writes per lease", ratio(sim.landed, sim.acquired), ratio(real.landed, real.acquired), 0.5},
		{"retries per lost acquire", ratio(sim.retries, sim.lostAcq), ratio(real.retries, real.lostAcq), 0.5},
		{"stalls per lease", ratio(sim.stallsSeen, sim.acquired), ratio(real.stallsSeen, real.acquired), 0.5},
	}
	for _, c := range checks {
		if !near(c.sim, c.real, c.tol) {
			t.Errorf("%s: simulator %.2f, real time %.2f", c.what, c.sim, c.real)
		}
	}
	if sim.acquired > 0 && real.acquired == 0 || sim.acquired == 0 && real.acquired > 0 {
		t.Errorf("acquired: simulator %d, real time %d", sim.acquired, real.acquired)
	}
}
