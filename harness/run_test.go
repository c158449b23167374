package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

func builtin(t *testing.T, name string) spec.Scenario {
	t.Helper()
	sc, ok := spec.Builtin(name)
	if !ok {
		t.Fatalf("no built-in scenario %q", name)
	}
	return sc
}

func run(t *testing.T, sc spec.Scenario, subs ...history.Subscriber) *history.Result {
	t.Helper()
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: subs})
	if err != nil {
		t.Fatalf("Run(%s): %v", sc.Name, err)
	}
	return res
}

func TestSameSeedSameRun(t *testing.T) {
	for _, name := range spec.BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			sc := builtin(t, name)
			if sc.Duration > 30*time.Second {
				sc.Duration = 30 * time.Second
			}
			var first, second []history.Event
			a := run(t, sc, history.SubscriberFunc(func(e history.Event) { first = append(first, e) }))
			b := run(t, sc, history.SubscriberFunc(func(e history.Event) { second = append(second, e) }))
			if a.Digest != b.Digest {
				t.Fatalf("digest %s then %s", a.Digest, b.Digest)
			}
			if len(first) != len(second) {
				t.Fatalf("%d events then %d", len(first), len(second))
			}
			for i := range first {
				x, y := first[i], second[i]
				x.Intervention, y.Intervention = nil, nil
				if x != y {
					t.Fatalf("event %d differs:\n%+v\n%+v", i, x, y)
				}
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Fatalf("reports differ:\n%s\n%s", ja, jb)
			}
		})
	}
}

func TestDifferentSeedDifferentRun(t *testing.T) {
	sc := builtin(t, "crowd")
	sc.Duration = 10 * time.Second
	seen := map[string]uint64{}
	for seed := uint64(1); seed <= 20; seed++ {
		sc.Seed = seed
		d := run(t, sc).Digest
		if prev, ok := seen[d]; ok {
			t.Fatalf("seeds %d and %d gave the same digest %s", prev, seed, d)
		}
		seen[d] = seed
	}
}

func TestSelfCheck(t *testing.T) {
	sc := builtin(t, "lost-replies")
	if _, err := harness.SelfCheck(t.Context(), sc, nil); err != nil {
		t.Fatal(err)
	}
}

// TestBuiltinOutcomes pins what each built-in scenario must show: the
// point it was written to make.
func TestBuiltinOutcomes(t *testing.T) {
	type want func(t *testing.T, naive, fenced *history.Report)
	atLeast := func(t *testing.T, what string, got, n int) {
		t.Helper()
		if got < n {
			t.Errorf("%s = %d, want >= %d", what, got, n)
		}
	}
	exactly := func(t *testing.T, what string, got, n int) {
		t.Helper()
		if got != n {
			t.Errorf("%s = %d, want %d", what, got, n)
		}
	}
	fencedSafe := func(t *testing.T, fenced *history.Report) {
		t.Helper()
		exactly(t, "fenced stale_writes_landed", fenced.StaleWritesLanded, 0)
		exactly(t, "fenced unexplained_refusals", fenced.UnexplainedRefusals, 0)
		if len(fenced.Violations) > 0 {
			t.Errorf("fenced violations: %v", fenced.Violations)
		}
	}
	cases := map[string]want{
		"gap": func(t *testing.T, naive, fenced *history.Report) {
			exactly(t, "naive stale_writes_landed", naive.StaleWritesLanded, 1)
			exactly(t, "naive silent_overlaps", naive.SilentOverlaps, 1)
			exactly(t, "naive commits_refused", naive.CommitsRefused, 0)
			exactly(t, "fenced commits_refused", fenced.CommitsRefused, 1)
			exactly(t, "fenced commits_admitted", fenced.CommitsAdmitted, 1)
			fencedSafe(t, fenced)
		},
		"renewal": func(t *testing.T, naive, fenced *history.Report) {
			exactly(t, "naive containment_breaches", naive.ContainmentBreaches, 1)
			exactly(t, "naive stale_writes_landed", naive.StaleWritesLanded, 1)
			exactly(t, "fenced containment_breaches", fenced.ContainmentBreaches, 0)
			exactly(t, "fenced checks_failed", fenced.ChecksFailed, 1)
			exactly(t, "fenced overlaps", fenced.Overlaps, 0)
			fencedSafe(t, fenced)
		},
		"overlap": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "naive stale_writes_landed", naive.StaleWritesLanded, 1)
			atLeast(t, "fenced commits_refused", fenced.CommitsRefused, 1)
			fencedSafe(t, fenced)
		},
		"contend": func(t *testing.T, naive, fenced *history.Report) {
			// Each pair's stalls end together: the new holder writes first,
			// the lapsed one a millisecond later.
			exactly(t, "naive stale_writes_landed", naive.StaleWritesLanded, 8)
			exactly(t, "naive silent_overlaps", naive.SilentOverlaps, 8)
			exactly(t, "fenced commits_refused", fenced.CommitsRefused, 8)
			exactly(t, "fenced refused_overlaps", fenced.RefusedOverlaps, 8)
			fencedSafe(t, fenced)
		},
		"crowd": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "naive silent_overlaps", naive.SilentOverlaps, 1)
			atLeast(t, "fenced refused_overlaps", fenced.RefusedOverlaps, 1)
			exactly(t, "fenced silent_overlaps", fenced.SilentOverlaps, 0)
			fencedSafe(t, fenced)
		},
		"lost-replies": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "fenced retries", fenced.Retries, 1)
			atLeast(t, "fenced messages_lost", fenced.MessagesLost, 1)
			fencedSafe(t, fenced)
		},
		"drift": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "fenced containment_breaches", fenced.ContainmentBreaches, 1)
			fencedSafe(t, fenced) // outside the budget: breaches are expected, not violations
		},
		"drift-inside": func(t *testing.T, naive, fenced *history.Report) {
			exactly(t, "fenced containment_breaches", fenced.ContainmentBreaches, 0)
			atLeast(t, "naive containment_breaches", naive.ContainmentBreaches, 1)
			fencedSafe(t, fenced)
		},
		"restart-lost": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "fenced fence_reuses", fenced.FenceReuses, 1)
			atLeast(t, "fenced commits_refused", fenced.CommitsRefused, 1)
			fencedSafe(t, fenced)
		},
		"restart-persisted": func(t *testing.T, naive, fenced *history.Report) {
			exactly(t, "fenced fence_reuses", fenced.FenceReuses, 0)
			fencedSafe(t, fenced)
		},
		"partition": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "fenced messages_lost", fenced.MessagesLost, 1)
			fencedSafe(t, fenced)
		},
		"duplicates": func(t *testing.T, naive, fenced *history.Report) {
			fencedSafe(t, fenced)
		},
		"lock-delay": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "naive stale_writes_landed", naive.StaleWritesLanded, 5) // 20 measured
			exactly(t, "naive idle_while_waiting_ms", naive.IdleWhileWaitingMS, 0)
			fencedSafe(t, fenced)
		},
		"push": func(t *testing.T, naive, fenced *history.Report) {
			atLeast(t, "fenced pushes_applied", fenced.PushesApplied, 1)
			fencedSafe(t, fenced)
		},
	}
	for _, name := range spec.BuiltinNames() {
		check, ok := cases[name]
		if !ok {
			t.Errorf("built-in %q has no expected outcome here", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			res := run(t, builtin(t, name))
			check(t, res.Modes[history.Naive], res.Modes[history.Fenced])
			if res.Failed() != (len(res.Modes[history.Fenced].Violations) > 0) {
				t.Error("Failed() disagrees with the fenced violations")
			}
		})
	}
}

// TestGapTimeline replays the check-to-write gap (the gap scenario: a
// holder checks at 950ms, stalls past its 1s TTL, writes at 1400ms) to the
// millisecond and checks the events that make its point.
func TestGapTimeline(t *testing.T) {
	type step struct {
		at    time.Duration
		kind  history.Kind
		agent string
		fence leasefence.Fence
	}
	want := map[history.Mode][]step{
		history.Naive: {
			{0, history.Acquired, "agent-1", 1},
			{950 * time.Millisecond, history.CheckPassed, "agent-1", 1},
			{1000 * time.Millisecond, history.Expired, "agent-1", 1},
			{1000 * time.Millisecond, history.Acquired, "agent-2", 2},
			{1010 * time.Millisecond, history.CheckPassed, "agent-2", 2},
			{1010 * time.Millisecond, history.WriteLanded, "agent-2", 2},
			{1400 * time.Millisecond, history.WriteLanded, "agent-1", 1}, // stale, silently
		},
		history.Fenced: {
			{0, history.Acquired, "agent-1", 1},
			{950 * time.Millisecond, history.CheckPassed, "agent-1", 1},
			{1000 * time.Millisecond, history.Expired, "agent-1", 1},
			{1000 * time.Millisecond, history.Acquired, "agent-2", 2},
			{1010 * time.Millisecond, history.CheckPassed, "agent-2", 2},
			{1010 * time.Millisecond, history.CommitAdmitted, "agent-2", 2},
			{1400 * time.Millisecond, history.CommitRefused, "agent-1", 1},
		},
	}
	for mode, steps := range want {
		t.Run(string(mode), func(t *testing.T) {
			var got []step
			sim, err := harness.NewSim(builtin(t, "gap"), mode, history.SubscriberFunc(func(e history.Event) {
				switch e.Kind {
				case history.Acquired, history.CheckPassed, history.Expired, history.CommitAdmitted, history.CommitRefused, history.WriteLanded:
					got = append(got, step{e.At, e.Kind, spec.AgentName(e.Agent), e.Fence})
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sim.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(got) < len(steps) {
				t.Fatalf("got %d steps %+v, want %+v", len(got), got, steps)
			}
			for i, w := range steps {
				if got[i] != w {
					t.Errorf("step %d = %+v, want %+v", i, got[i], w)
				}
			}
		})
	}
}

func TestRenewalTimelineBeliefs(t *testing.T) {
	deadlines := map[history.Mode]time.Duration{}
	for _, mode := range harness.Modes {
		sim, err := harness.NewSim(builtin(t, "renewal"), mode, history.SubscriberFunc(func(e history.Event) {
			if e.Kind == history.Renewed {
				deadlines[e.Mode] = e.Deadline
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Renewal sent at 100ms, processed at 140ms (expiry 1140ms), reply at
	// 1000ms: the client anchors at the send, the naive lease at the reply.
	if got, want := deadlines[history.Fenced], 1100*time.Millisecond; got != want {
		t.Errorf("fenced holder believes until %v, want %v", got, want)
	}
	if got, want := deadlines[history.Naive], 2000*time.Millisecond; got != want {
		t.Errorf("naive holder believes until %v, want %v", got, want)
	}
}

func TestValidate(t *testing.T) {
	good := builtin(t, "crowd")
	if err := good.Validate(); err != nil {
		t.Fatalf("crowd: %v", err)
	}
	cases := []struct {
		field  string
		change func(*spec.Scenario)
	}{
		{"name", func(s *spec.Scenario) { s.Name = "" }},
		{"duration", func(s *spec.Scenario) { s.Duration = 0 }},
		{"duration", func(s *spec.Scenario) { s.Duration = spec.MaxDuration + 1 }},
		{"agents", func(s *spec.Scenario) { s.Agents = 0 }},
		{"resources", func(s *spec.Scenario) { s.Resources = -1 }},
		{"pick", func(s *spec.Scenario) { s.Pick = "nearest" }},
		{"ttl", func(s *spec.Scenario) { s.TTL = 0 }},
		{"clock_skew", func(s *spec.Scenario) { s.ClockSkew = s.TTL }},
		{"agent.stall", func(s *spec.Scenario) { s.Agent.Stall.Max = s.Agent.Stall.Min - 1 }},
		{"agent.stall.tail_p", func(s *spec.Scenario) { s.Agent.Stall.TailP = 1.5 }},
		{"agent.writes_per_lease", func(s *spec.Scenario) { s.Agent.WritesPerLease = 0 }},
		{"agent.renew_at", func(s *spec.Scenario) { s.Agent.RenewAt = 1 }},
		{"network.drop_replies", func(s *spec.Scenario) { s.Network.DropReplies = -0.1 }},
		{"network.duplicate", func(s *spec.Scenario) { s.Network.Duplicate = 2 }},
		{"network.max_retries", func(s *spec.Scenario) { s.Network.MaxRetries = -1 }},
		{"clocks.drift_ppm.min", func(s *spec.Scenario) { s.Clocks.DriftPPM.Min = -spec.MaxDriftPPM - 1 }},
		{"clocks.agent.agent-99", func(s *spec.Scenario) {
			s.Clocks.Agent = map[string]spec.AgentClock{"agent-99": {}}
		}},
		{"partitions[0].agent", func(s *spec.Scenario) {
			s.Partitions = []spec.Partition{{Agent: "bob", From: 0, To: time.Second}}
		}},
		{"partitions[0]", func(s *spec.Scenario) {
			s.Partitions = []spec.Partition{{Agent: "agent-1", From: time.Second, To: time.Second}}
		}},
		{"restarts[0].at", func(s *spec.Scenario) { s.Restarts = []spec.Restart{{At: s.Duration + 1}} }},
		{"push.drop", func(s *spec.Scenario) { s.Push.Drop = 3 }},
		{"script[0].do", func(s *spec.Scenario) {
			s.Script = []spec.Action{{Agent: "agent-1", Do: "dance"}}
		}},
		{"script[0].resource", func(s *spec.Scenario) {
			s.Script = []spec.Action{{Agent: "agent-1", Do: spec.ActAcquire, Resource: "res-99"}}
		}},
		{"script[0].duration", func(s *spec.Scenario) {
			s.Script = []spec.Action{{Agent: "agent-1", Do: spec.ActStall}}
		}},
		{"interventions[0]", func(s *spec.Scenario) {
			s.Interventions = []history.Intervention{{Kind: history.SetDropRate, Value: 7}}
		}},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			sc := builtin(t, "crowd")
			c.change(&sc)
			err := sc.Validate()
			if !errors.Is(err, spec.ErrInvalidScenario) {
				t.Fatalf("Validate() = %v, want ErrInvalidScenario", err)
			}
			var fe *spec.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Validate() = %v, want a FieldError for %q", err, c.field)
			}
			if _, err := harness.Run(t.Context(), sc, harness.RunOptions{}); err == nil {
				t.Fatal("Run accepted an invalid scenario")
			}
		})
	}
}

func TestValidateJoinsEveryProblem(t *testing.T) {
	var sc spec.Scenario
	err := sc.Validate()
	for _, field := range []string{"name", "duration", "agents", "resources", "ttl", "agent.writes_per_lease"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("%q missing from %v", field, err)
		}
	}
}

func TestDriftWithinBudget(t *testing.T) {
	cases := []struct {
		skew     time.Duration
		ppm      float64
		coordPPM float64
		want     bool
	}{
		{0, 0, 0, true},
		{0, -1, 0, false},
		{20 * time.Millisecond, -20000, 0, true}, // 2% of 1s
		{19 * time.Millisecond, -20000, 0, false},
		{0, 20000, 0, true}, // fast clocks end their belief early
		{0, 0, 1000, false}, // a fast coordinator expires early
	}
	for _, c := range cases {
		sc := spec.Scenario{TTL: time.Second, ClockSkew: c.skew,
			Clocks: spec.Clocks{DriftPPM: spec.Range{Min: c.ppm, Max: max(c.ppm, 0)}, CoordinatorDriftPPM: c.coordPPM}}
		if got := sc.DriftWithinBudget(); got != c.want {
			t.Errorf("skew %v drift %v coordinator %v: DriftWithinBudget = %v, want %v", c.skew, c.ppm, c.coordPPM, got, c.want)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := harness.Run(ctx, builtin(t, "crowd"), harness.RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if res == nil || len(res.Modes) == 0 {
		t.Fatal("a cancelled run returned nothing it had")
	}
}

func TestResultJSON(t *testing.T) {
	res := run(t, builtin(t, "gap"))
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "seed", "digest", "virtual_duration_ms", "events", "modes"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result JSON lacks %q", k)
		}
	}
	fenced := m["modes"].(map[string]any)["fenced"].(map[string]any)
	for _, k := range []string{"acquisitions", "renewals", "expiries", "commits_admitted", "commits_refused",
		"stale_writes_landed", "overlaps", "silent_overlaps", "containment_breaches", "counterexamples"} {
		if _, ok := fenced[k]; !ok {
			t.Errorf("mode JSON lacks %q", k)
		}
	}
}

// The scenario's lock_delay is the simulator coordinator's: with it, an
// acquire that comes while an expired lease's delay runs is denied as
// "lock-delay"; without it, never.
func TestLockDelayReachesCoordinator(t *testing.T) {
	for _, delay := range []time.Duration{0, 2 * time.Second} {
		sc := builtin(t, "overlap")
		sc.LockDelay = delay
		n := 0
		run(t, sc, history.SubscriberFunc(func(e history.Event) {
			if e.Kind == history.Denied && e.Reason == leasefence.ReasonLockDelay {
				n++
			}
		}))
		if (n > 0) != (delay > 0) {
			t.Errorf("lock_delay %v: %d denials for lock-delay", delay, n)
		}
	}
}
