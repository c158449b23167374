package agent_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// bench is one agent on a manual true clock, with a real coordinator on
// the same clock: enough to feed the agent every input by hand.
type bench struct {
	t     *testing.T
	now   time.Duration
	coord *leasefence.Coordinator
	ag    *agent.Agent
}

// clock is a drifting clock on the bench's true time.
type clock struct {
	leasefence.Clock
	d agent.Drift
}

func (c *clock) TrueAt(i leasefence.Instant) time.Duration {
	v := time.Duration(float64(i.Offset()-c.d.Offset) / c.d.Rate)
	for c.d.Offset+time.Duration(float64(v)*c.d.Rate) < i.Offset() {
		v++
	}
	return v
}

func newBench(t *testing.T, sc spec.Scenario, mode history.Mode, lossy bool) *bench {
	t.Helper()
	return newBenchOf(t, sc, mode, "", lossy)
}

// newBenchOf is newBench for a mode whose contender writes by disc (""
// for the lab's own naive or fenced).
func newBenchOf(t *testing.T, sc spec.Scenario, mode history.Mode, disc history.Discipline, lossy bool) *bench {
	t.Helper()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	b := &bench{t: t}
	coordClock := leasefence.NewClock("coordinator", func() time.Duration { return b.now })
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: coordClock, TTL: sc.TTL})
	if err != nil {
		t.Fatal(err)
	}
	b.coord = c
	h := sc.Header([]history.Mode{mode})
	b.ag, err = agent.New(agent.Config{
		Scenario: &sc, Mode: mode, Discipline: disc, Index: 0, Scripted: len(sc.Script) > 0, Resources: h.Resources, Lossy: lossy,
		AgentIndex: func(name string) int {
			i, ok := sc.AgentIndex(name)
			if !ok {
				return -1
			}
			return i
		},
		Clock: func(name string, d agent.Drift) agent.Clock {
			c := &clock{d: d}
			c.Clock = leasefence.NewClock(leasefence.Domain(name), func() time.Duration {
				return d.Offset + time.Duration(float64(b.now)*d.Rate)
			})
			return c
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scenario is a one-agent, one-resource scenario with constant draws, so
// that every instant of a table is known.
func scenario() spec.Scenario {
	return spec.Scenario{
		Name: "unit", Seed: 1, Duration: time.Minute, Agents: 1, Resources: 1, TTL: time.Second,
		Agent: spec.Behaviour{
			Think: spec.Const(100 * time.Millisecond), Stall: spec.Const(50 * time.Millisecond),
			WorkGap: spec.Const(20 * time.Millisecond), WritesPerLease: 2,
		},
	}
}

// grant is the coordinator's answer to the agent's pending acquire.
func (b *bench) grant() leasefence.AcquireOutcome {
	out, err := b.coord.Acquire(b.ag.PendingAcquire())
	if err != nil {
		b.t.Fatal(err)
	}
	return out
}

// describe renders outputs as short words, to compare with a table.
func describe(out []agent.Output) string {
	var w []string
	for _, o := range out {
		switch o.Kind {
		case agent.Emit:
			s := o.Event.Kind.String()
			if o.Event.Outcome != "" {
				s += "(" + string(o.Event.Outcome) + ")"
			}
			w = append(w, s)
		case agent.Send:
			w = append(w, "send "+string(o.Request.Kind))
		case agent.Arm:
			w = append(w, fmt.Sprintf("arm %s@%v", timerName[o.Timer], o.At))
		case agent.Write:
			w = append(w, fmt.Sprintf("write %d", o.Write.Token.Fence))
		case agent.Failed:
			w = append(w, "failed "+o.Failure.Op)
		}
	}
	return strings.Join(w, ", ")
}

var timerName = map[agent.Timer]string{
	agent.TimerStep: "step", agent.TimerRetry: "retry", agent.TimerRenew: "renew", agent.TimerStallEnd: "stall-end",
}

// step is one input of a table: what to feed at which instant, and the
// outputs it must return.
type step struct {
	at   time.Duration
	feed func(b *bench) []agent.Output
	want string
}

func fire(t agent.Timer, gen uint32) func(*bench) []agent.Output {
	return func(b *bench) []agent.Output { return b.ag.Fire(b.now, t, gen) }
}

// reply answers the pending acquire from the coordinator.
func reply(b *bench) []agent.Output {
	out := b.grant()
	return b.ag.AcquireReplied(b.now, b.ag.PendingAcquire().RequestID, out, 0)
}

func committed(landed bool) func(*bench) []agent.Output {
	return func(b *bench) []agent.Output { return b.ag.Committed(b.now, landed) }
}

// then is base followed by more, sharing nothing with base.
func then(base []step, more ...step) []step {
	return append(append([]step(nil), base...), more...)
}

func run(t *testing.T, b *bench, steps []step) {
	t.Helper()
	for i, s := range steps {
		b.now = s.at
		if got := describe(s.feed(b)); got != s.want {
			t.Fatalf("step %d at %v:\n got  %s\n want %s", i, s.at, got, s.want)
		}
	}
}

func start(b *bench) []agent.Output { return b.ag.Start(b.now) }

// The agent's loop, input by input: think, acquire, check, stall, write,
// the work gap, the second write, and the lease let lapse.
func TestLoop(t *testing.T) {
	b := newBench(t, scenario(), history.Fenced, false)
	run(t, b, []step{
		{0, start, "arm step@100ms"},
		{100 * time.Millisecond, fire(agent.TimerStep, 0), "send acquire"},
		{105 * time.Millisecond, reply, "acquired, arm step@105ms"},
		{105 * time.Millisecond, fire(agent.TimerStep, 2), "check_passed, stall_began, arm step@155ms"},
		{155 * time.Millisecond, fire(agent.TimerStep, 2), "stall_ended, write 1"},
		{156 * time.Millisecond, committed(true), "arm step@176ms"},
		{176 * time.Millisecond, fire(agent.TimerStep, 2), "check_passed, stall_began, arm step@226ms"},
		{226 * time.Millisecond, fire(agent.TimerStep, 2), "stall_ended, write 1"},
		{226 * time.Millisecond, committed(true), "lease_abandoned(done), arm step@326ms"},
		// A timer of a superseded step does nothing.
		{300 * time.Millisecond, fire(agent.TimerStep, 2), ""},
	})
}

// Each rule of the loop, from a fresh agent, as a table of inputs and the
// outputs they must give.
func TestRules(t *testing.T) {
	acquire := []step{
		{0, start, "arm step@100ms"},
		{100 * time.Millisecond, fire(agent.TimerStep, 0), "send acquire"},
	}
	holding := then(acquire,
		step{110 * time.Millisecond, reply, "acquired, arm step@110ms"},
		step{110 * time.Millisecond, fire(agent.TimerStep, 2), "check_passed, stall_began, arm step@160ms"},
		step{160 * time.Millisecond, fire(agent.TimerStep, 2), "stall_ended, write 1"},
	)
	for _, tc := range []struct {
		name  string
		edit  func(*spec.Scenario)
		mode  history.Mode
		lossy bool
		steps []step
	}{
		{"a refused write ends the lease", nil, history.Fenced, false, then(holding,
			step{160 * time.Millisecond, committed(false), "lease_abandoned(commit_refused), arm step@260ms"})},
		{"a write the store failed ends the lease, and the agent goes on", nil, history.Naive, false, then(holding,
			step{160 * time.Millisecond, func(b *bench) []agent.Output {
				return b.ag.WriteFailed(b.now, "Write", errors.New("etcdserver: request timed out"))
			}, "write_failed, lease_abandoned(write_failed), arm step@260ms"},
			step{260 * time.Millisecond, fire(agent.TimerStep, 3), "send acquire"},
			// An outcome with no write outstanding changes nothing.
			step{270 * time.Millisecond, func(b *bench) []agent.Output {
				return b.ag.WriteFailed(b.now, "Write", errors.New("late"))
			}, ""})},
		// The belief ends before the release is sent, so it has ended
		// before the coordinator can let the lease go.
		{"release after the last write", func(sc *spec.Scenario) { sc.Agent.WritesPerLease, sc.Agent.Release = 1, true },
			history.Fenced, false, then(holding,
				step{160 * time.Millisecond, committed(true), "lease_abandoned(released), arm step@260ms, send release"})},
		{"a lossy network arms the 4xTTL wait", nil, history.Fenced, true, then(acquire[:1],
			step{100 * time.Millisecond, fire(agent.TimerStep, 0), "send acquire, arm retry@4.1s"},
			step{4100 * time.Millisecond, fire(agent.TimerRetry, 1), "acquire_abandoned(no_reply), arm step@4.2s"})},
		{"retries resend under the same id", func(sc *spec.Scenario) {
			sc.Network.RetryAfter, sc.Network.MaxRetries, sc.Network.DropReplies = 300*time.Millisecond, 1, 0.5
		}, history.Fenced, true, then(acquire[:1],
			step{100 * time.Millisecond, fire(agent.TimerStep, 0), "send acquire, arm retry@400ms"},
			step{400 * time.Millisecond, fire(agent.TimerRetry, 1), "request_retried, send acquire, arm retry@700ms"},
			step{700 * time.Millisecond, fire(agent.TimerRetry, 1), "acquire_abandoned(no_reply), arm step@800ms"})},
		{"a denial waits out the hint", nil, history.Fenced, false, then(acquire,
			step{110 * time.Millisecond, func(b *bench) []agent.Output {
				return b.ag.AcquireReplied(b.now, b.ag.PendingAcquire().RequestID,
					leasefence.AcquireOutcome{Reason: leasefence.ReasonAlreadyHeld, HeldBy: "agent-1", RetryAfter: 700 * time.Millisecond}, 0)
			}, "denied, arm step@810ms"})},
		{"a late reply changes nothing", nil, history.Fenced, false, then(holding[:3],
			step{120 * time.Millisecond, func(b *bench) []agent.Output {
				return b.ag.AcquireReplied(b.now, "no-such-request", leasefence.AcquireOutcome{}, 0)
			}, ""})},
		{"a failed check gives up", func(sc *spec.Scenario) { sc.Agent.Stall = spec.Const(2 * time.Second) },
			history.Fenced, false, then(holding[:3],
				step{110 * time.Millisecond, fire(agent.TimerStep, 2), "check_passed, stall_began, arm step@2.11s"},
				step{2110 * time.Millisecond, fire(agent.TimerStep, 2), "stall_ended, write 1"},
				step{2110 * time.Millisecond, committed(true), "arm step@2.13s"},
				step{2130 * time.Millisecond, fire(agent.TimerStep, 2), "check_failed, lease_abandoned(check_failed), arm step@2.23s"})},
		{"a live stall holds the next step", nil, history.Fenced, false, then(acquire[:1],
			step{50 * time.Millisecond, func(b *bench) []agent.Output { return b.ag.Stall(b.now, time.Second) },
				"stall_began, arm stall-end@1.05s"},
			step{100 * time.Millisecond, fire(agent.TimerStep, 0), "arm step@1.05s"},
			step{1050 * time.Millisecond, fire(agent.TimerStallEnd, 1), "stall_ended"},
			step{1050 * time.Millisecond, fire(agent.TimerStep, 0), "send acquire"})},
		{"the network turning lossy arms the wait", nil, history.Fenced, false, then(acquire,
			step{150 * time.Millisecond, func(b *bench) []agent.Output { return b.ag.SetLossy(b.now, true) }, "arm retry@4.15s"})},
		{"renewal at half-life, from the send", func(sc *spec.Scenario) { sc.Agent.RenewAt = 0.5 },
			history.Fenced, false, then(acquire,
				step{110 * time.Millisecond, reply, "acquired, arm renew@600ms, arm step@110ms"},
				step{110 * time.Millisecond, fire(agent.TimerStep, 2), "check_passed, stall_began, arm step@160ms"},
				step{160 * time.Millisecond, fire(agent.TimerStep, 2), "stall_ended, write 1"},
				step{160 * time.Millisecond, committed(true), "arm step@180ms"},
				step{600 * time.Millisecond, fire(agent.TimerRenew, 0), "send renew"})},
		{"a renewal due in a stall waits for the write", func(sc *spec.Scenario) {
			sc.Agent.RenewAt, sc.Agent.Stall = 0.5, spec.Const(600*time.Millisecond)
		}, history.Fenced, false, then(acquire,
			step{110 * time.Millisecond, reply, "acquired, arm renew@600ms, arm step@110ms"},
			step{110 * time.Millisecond, fire(agent.TimerStep, 2), "check_passed, stall_began, arm step@710ms"},
			step{600 * time.Millisecond, fire(agent.TimerRenew, 0), ""},
			step{710 * time.Millisecond, fire(agent.TimerStep, 2), "stall_ended, write 1"},
			step{710 * time.Millisecond, committed(true), "send renew, arm step@730ms"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := scenario()
			if tc.edit != nil {
				tc.edit(&sc)
			}
			run(t, newBench(t, sc, tc.mode, tc.lossy), tc.steps)
		})
	}
}

// The naive and fenced agents differ only in their check: the fenced one
// anchors the lease at the acquire's send, the lab's naive one at the
// reply's arrival. A reply that took 900ms leaves the fenced agent 100ms of
// lease and the naive one a full TTL. A naive holder of a library's lock
// believes the lock's own deadline (redsync's Until()), which the TTL is
// the rest of when the lock answered: from the send, as the library dates
// it, never the reply's delay past it (`lab run overlap --contenders
// redsync,redislock,etcd-mutex --backend memory --duration 10s`, seed 1,
// charged each lock 4-7 containment breaches of the lab's dating).
func TestNaiveAndFencedCheck(t *testing.T) {
	for _, tc := range []struct {
		mode history.Mode
		disc history.Discipline
		want string
	}{
		{history.Fenced, "", "check_failed, lease_abandoned(check_failed), arm step@1.6s"},
		{history.Naive, "", "check_passed, stall_began, arm step@1.55s"},
		{"redsync", history.DisciplineNaive, "check_failed, lease_abandoned(check_failed), arm step@1.6s"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			sc := scenario()
			sc.Agent.Stall = spec.Const(50 * time.Millisecond)
			b := newBenchOf(t, sc, tc.mode, tc.disc, false)
			b.ag.Start(0)
			b.now = 100 * time.Millisecond
			b.ag.Fire(b.now, agent.TimerStep, 0)
			out := b.grant()
			b.now = time.Second
			b.ag.AcquireReplied(b.now, b.ag.PendingAcquire().RequestID, out, 0)
			b.now = 1500 * time.Millisecond
			if got := describe(b.ag.Fire(b.now, agent.TimerStep, 2)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// A scripted agent does only what its script says.
func TestScript(t *testing.T) {
	sc := scenario()
	sc.Script = []spec.Action{{At: 0, Agent: "agent-1", Do: spec.ActAcquire}}
	b := newBench(t, sc, history.Fenced, true)
	act := func(do spec.ActionKind, d time.Duration) func(*bench) []agent.Output {
		return func(b *bench) []agent.Output {
			return b.ag.Script(b.now, spec.Action{At: b.now, Agent: "agent-1", Do: do, Duration: d})
		}
	}
	run(t, b, []step{
		{0, start, ""},
		{0, act(spec.ActWrite, 0), "write_skipped"},
		{0, act(spec.ActAcquire, 0), "send acquire"},
		{10 * time.Millisecond, reply, "acquired"},
		{20 * time.Millisecond, act(spec.ActCheck, 0), "check_passed"},
		{20 * time.Millisecond, act(spec.ActStall, 500*time.Millisecond), "stall_began, arm stall-end@520ms"},
		{520 * time.Millisecond, fire(agent.TimerStallEnd, 0), "stall_ended"},
		{520 * time.Millisecond, act(spec.ActWrite, 0), "write 1"},
		{521 * time.Millisecond, committed(true), ""},
		{600 * time.Millisecond, act(spec.ActRelease, 0), "lease_abandoned(released), send release"},
	})
}

// A scripted acquire while an acquire is still on its way is that acquire:
// the agent sends nothing new, and the first request's grant, however late,
// is the agent's lease.
func TestScriptedAcquireWhileAcquiring(t *testing.T) {
	sc := scenario()
	sc.Script = []spec.Action{{At: 0, Agent: "agent-1", Do: spec.ActAcquire}}
	b := newBench(t, sc, history.Fenced, true)
	acquire := func(b *bench) []agent.Output {
		return b.ag.Script(b.now, spec.Action{At: b.now, Agent: "agent-1", Do: spec.ActAcquire})
	}
	run(t, b, []step{
		{0, start, ""},
		{0, acquire, "send acquire"},
		{time.Second, acquire, ""},
		{1500 * time.Millisecond, reply, "acquired"},
	})
}

// TestRetryWait checks the wait the agent arms when its network may lose
// an acquire (the tables above arm it at 4.1s and 400ms): retry_after when
// set, else 4 x the TTL.
func TestRetryWait(t *testing.T) {
	for _, tc := range []struct {
		retryAfter, want time.Duration
	}{{0, 4 * time.Second}, {300 * time.Millisecond, 300 * time.Millisecond}} {
		sc := scenario()
		sc.Network.RetryAfter = tc.retryAfter
		if got := agent.RetryWait(&sc); got != tc.want {
			t.Errorf("retry_after %v: RetryWait %v, want %v", tc.retryAfter, got, tc.want)
		}
	}
}
