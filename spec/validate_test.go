package spec_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

const maxInt64 = time.Duration(math.MaxInt64)

// Every duration, offset and distribution is bounded by the arithmetic it
// feeds: each of these validated before, and then overflowed, panicked or
// made the library's ErrOutOfRange look like a library bug.
func TestBoundsRefused(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*spec.Scenario)
	}{
		{"agent.stall.tail_max", func(sc *spec.Scenario) { sc.Agent.Stall.TailMax = 292 * 365 * 24 * time.Hour }},
		{"agent.stall.max", func(sc *spec.Scenario) { sc.Agent.Stall = spec.Dist{Max: maxInt64} }},
		{"clocks.offset.max", func(sc *spec.Scenario) { sc.Clocks.Offset.Max = maxInt64 / 2 }},
		{"clocks.offset.min", func(sc *spec.Scenario) { sc.Clocks.Offset.Min = -maxInt64 / 2 }},
		{"clocks.agent.agent-1.offset", func(sc *spec.Scenario) {
			sc.Clocks.Agent = map[string]spec.AgentClock{"agent-1": {Offset: maxInt64 - time.Hour}}
		}},
		{"ttl", func(sc *spec.Scenario) { sc.TTL = maxInt64 / 3 }},
		{"network.retry_after", func(sc *spec.Scenario) { sc.Network.RetryAfter = maxInt64 }},
		{"network.reply_delay.max", func(sc *spec.Scenario) { sc.Network.ReplyDelay = spec.Uniform(0, maxInt64) }},
		{"push.delay.max", func(sc *spec.Scenario) { sc.Push.Delay = spec.Const(maxInt64) }},
		{"partitions[0]", func(sc *spec.Scenario) {
			sc.Partitions = []spec.Partition{{Agent: "agent-1", From: time.Second, To: maxInt64}}
		}},
		{"crashes[0].restart", func(sc *spec.Scenario) {
			sc.Crashes = []spec.Crash{{Agent: "agent-1", At: time.Second, Restart: maxInt64}}
		}},
		{"crashes[0].at", func(sc *spec.Scenario) { sc.Crashes = []spec.Crash{{Agent: "agent-1", At: maxInt64}} }},
		{"crashes[0].agent", func(sc *spec.Scenario) { sc.Crashes = []spec.Crash{{Agent: "agent-99", At: time.Second}} }},
		{"script[0].duration", func(sc *spec.Scenario) {
			sc.Script = []spec.Action{{Agent: "agent-1", Do: spec.ActStall, Duration: maxInt64}}
		}},
		{"script[0].reply_delay", func(sc *spec.Scenario) {
			d := maxInt64
			sc.Script = []spec.Action{{Agent: "agent-1", Do: spec.ActAcquire, ReplyDelay: &d}}
		}},
		{"lock_delay", func(sc *spec.Scenario) { sc.LockDelay = -time.Second }},
		{"lock_delay", func(sc *spec.Scenario) { sc.LockDelay = leasefence.MaxLockDelay + time.Nanosecond }},
		{"agent.stall.lognormal.median", func(sc *spec.Scenario) {
			sc.Agent.Stall = spec.Dist{LogNormal: spec.LogNormal{P99: time.Second}}
		}},
		{"agent.stall.lognormal.p99", func(sc *spec.Scenario) {
			sc.Agent.Stall = spec.Dist{LogNormal: spec.LogNormal{Median: time.Second, P99: time.Millisecond}}
		}},
		{"agent.stall.lognormal.p99", func(sc *spec.Scenario) {
			sc.Agent.Stall = spec.Dist{LogNormal: spec.LogNormal{Median: time.Second, P99: maxInt64}}
		}},
		{"agent.stall", func(sc *spec.Scenario) {
			sc.Agent.Stall = spec.Dist{Max: time.Second, LogNormal: spec.LogNormal{Median: time.Second, P99: time.Second}}
		}},
		{"interventions[0]", func(sc *spec.Scenario) {
			sc.Interventions = []history.Intervention{{Kind: history.StallAgent, Agent: "agent-1", Duration: maxInt64}}
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			sc, _ := spec.Builtin("overlap")
			tc.edit(&sc)
			err := sc.Validate()
			var fe *spec.FieldError
			if !errors.Is(err, spec.ErrInvalidScenario) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Validate = %v, want a *FieldError for %s", err, tc.field)
			}
		})
	}
}

// A scenario at every bound at once validates, and runs on the simulator
// with no library error: nothing that validates overflows.
func TestBoundsRunClean(t *testing.T) {
	day := spec.MaxDuration
	sc, _ := spec.Builtin("overlap")
	sc.Duration, sc.TTL, sc.ClockSkew = day, time.Minute, time.Minute-time.Nanosecond
	sc.Agent.Think = spec.Dist{Max: time.Minute, TailP: 0.1, TailMin: day, TailMax: day}
	sc.Agent.Stall = spec.Dist{Min: 0, Max: day, TailP: 1, TailMin: day, TailMax: day}
	sc.Agent.WorkGap = spec.Const(day)
	sc.Agent.RenewAt = 0.999
	sc.Network = spec.Network{RequestDelay: spec.Uniform(0, day), ReplyDelay: spec.Uniform(0, day), RetryAfter: day, MaxRetries: 3, DropReplies: 0.5}
	sc.Clocks = spec.Clocks{DriftPPM: spec.Range{Min: -spec.MaxDriftPPM, Max: spec.MaxDriftPPM},
		Offset: spec.DurationRange{Min: -day, Max: day}, CoordinatorDriftPPM: spec.MaxDriftPPM,
		Agent: map[string]spec.AgentClock{"agent-1": {DriftPPM: spec.MaxDriftPPM, Offset: day}, "agent-2": {DriftPPM: -spec.MaxDriftPPM, Offset: -day}}}
	sc.Push = spec.Push{Enabled: true, Delay: spec.Const(day)}
	sc.Partitions = []spec.Partition{{Agent: "agent-3", From: day / 2, To: day}}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	var failures []string
	res, err := harness.Run(context.Background(), sc, harness.RunOptions{Subscribers: []history.Subscriber{
		history.SubscriberFunc(func(e history.Event) {
			if e.Kind == history.LibraryError {
				failures = append(failures, e.Detail)
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	if len(failures) > 0 {
		t.Fatalf("library errors: %s", strings.Join(failures, "; "))
	}
	if res.Modes[history.Fenced].Acquisitions == 0 {
		t.Fatal("nothing was acquired")
	}
}
