package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// SwarmKnob names a fault knob a swarm draws for each seed.
type SwarmKnob string

// The knobs a swarm draws. Every other field of the scenario is the base
// scenario's.
const (
	SwarmDropRequests SwarmKnob = "drop_requests"
	SwarmDropReplies  SwarmKnob = "drop_replies"
	SwarmDuplicate    SwarmKnob = "duplicate"
	SwarmRequestDelay SwarmKnob = "request_delay"
	SwarmReplyDelay   SwarmKnob = "reply_delay"
	// SwarmRetry is the acquire's retry policy (retry_after, max_retries),
	// drawn only when the base scenario never retries.
	SwarmRetry SwarmKnob = "retry"
	SwarmDrift SwarmKnob = "drift_ppm"
	// SwarmSkew is the skew budget: drawn to cover the drift or not.
	SwarmSkew SwarmKnob = "clock_skew"
	// SwarmStall is the long tail of the stall before a write.
	SwarmStall    SwarmKnob = "stall"
	SwarmRestarts SwarmKnob = "restarts"
	// SwarmPush is whether the gate push is on.
	SwarmPush SwarmKnob = "push"
	// SwarmPushDelay is the push's delay, drawn only when the base
	// scenario has none.
	SwarmPushDelay SwarmKnob = "push_delay"
)

// SwarmKnobs lists every knob a swarm draws, in the order it draws them.
var SwarmKnobs = []SwarmKnob{SwarmDropRequests, SwarmDropReplies, SwarmDuplicate, SwarmRequestDelay, SwarmReplyDelay,
	SwarmRetry, SwarmDrift, SwarmSkew, SwarmStall, SwarmRestarts, SwarmPush, SwarmPushDelay}

// SwarmRanges are the ranges a swarm draws each seed's fault knobs from, so
// that thousands of seeds explore thousands of fault mixes.
type SwarmRanges struct {
	Drop      spec.Range // both drop probabilities
	Duplicate spec.Range
	DelayMax  spec.DurationRange // the upper end of each network delay
	DriftPPM  spec.Range         // per-agent drift bounds; the skew covers them unless Uncovered
	Uncovered float64            // probability a seed's skew does not cover its drift
	TailP     spec.Range         // probability a stall is long
	TailMax   spec.Range         // a long stall's upper end, in TTLs
	Restarts  int                // at most this many coordinator restarts
	Persist   float64            // probability a restart keeps the fence counter
	Push      float64            // probability the gate push is on
	// Fixed are the knobs every seed keeps as the base scenario has them
	// (a knob flag fixes its knob). The others are drawn, and a seed draws
	// the same values for them whichever are fixed.
	Fixed []SwarmKnob
}

// DefaultSwarmRanges are the swarm's ranges unless told otherwise.
var DefaultSwarmRanges = SwarmRanges{
	Drop:      spec.Range{Min: 0, Max: 0.2},
	Duplicate: spec.Range{Min: 0, Max: 0.2},
	DelayMax:  spec.DurationRange{Min: time.Millisecond, Max: 50 * time.Millisecond},
	DriftPPM:  spec.Range{Min: -5000, Max: 5000},
	Uncovered: 0.2,
	TailP:     spec.Range{Min: 0, Max: 0.3},
	TailMax:   spec.Range{Min: 1, Max: 4},
	Restarts:  2,
	Persist:   0.5,
	Push:      0.5,
}

// Drawn returns the knobs a swarm with ranges draws, in SwarmKnobs order.
func (ranges *SwarmRanges) Drawn() []SwarmKnob {
	var out []SwarmKnob
	for _, k := range SwarmKnobs {
		if !slices.Contains(ranges.Fixed, k) {
			out = append(out, k)
		}
	}
	return out
}

// swarmDraw is one seed's draw of every knob, fixed or not, so that
// fixing one knob leaves the others' values as they were.
type swarmDraw struct {
	dropRequests, dropReplies, duplicate float64
	delayMax                             time.Duration
	driftLow                             float64
	covered                              bool
	tailP, tailMax                       float64
	restarts                             []spec.Restart
	push                                 bool
}

func drawSwarm(ranges *SwarmRanges, seed uint64, duration time.Duration) swarmDraw {
	r := rand.New(rand.NewPCG(seed, 0x5eed5a4a))
	in := func(x spec.Range) float64 { return x.Min + r.Float64()*(x.Max-x.Min) }
	var d swarmDraw
	d.dropRequests, d.dropReplies = in(ranges.Drop), in(ranges.Drop)
	d.duplicate = in(ranges.Duplicate)
	d.delayMax = ranges.DelayMax.Min + time.Duration(r.Float64()*float64(ranges.DelayMax.Max-ranges.DelayMax.Min))
	d.driftLow = in(ranges.DriftPPM)
	d.covered = r.Float64() >= ranges.Uncovered
	d.tailP, d.tailMax = in(ranges.TailP), in(ranges.TailMax)
	for range r.IntN(ranges.Restarts + 1) {
		at := time.Duration(r.Int64N(int64(duration))) + 1
		d.restarts = append(d.restarts, spec.Restart{At: at, Persist: r.Float64() < ranges.Persist})
	}
	d.push = r.Float64() < ranges.Push
	return d
}

// SwarmScenario is base with its seed set to seed and its fault knobs drawn
// from ranges with that seed, but for the knobs ranges fix: the exact
// scenario a swarm runs for seed. Its description ends with what was
// drawn, so that a report of it says what ran.
func SwarmScenario(base spec.Scenario, ranges SwarmRanges, seed uint64) spec.Scenario {
	sc := base
	sc.Seed = seed
	d := drawSwarm(&ranges, seed, sc.Duration)
	drawn := func(k SwarmKnob) bool { return !slices.Contains(ranges.Fixed, k) }
	var said []string
	say := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	if drawn(SwarmDropRequests) {
		sc.Network.DropRequests = d.dropRequests
		say("drop requests %.3f", d.dropRequests)
	}
	if drawn(SwarmDropReplies) {
		sc.Network.DropReplies = d.dropReplies
		say("drop replies %.3f", d.dropReplies)
	}
	if drawn(SwarmDuplicate) {
		sc.Network.Duplicate = d.duplicate
		say("duplicate %.3f", d.duplicate)
	}
	hi := d.delayMax
	if drawn(SwarmRequestDelay) {
		sc.Network.RequestDelay = spec.Uniform(0, hi)
		say("request delay 0-%s", history.FormatDuration(hi))
	}
	if drawn(SwarmReplyDelay) {
		sc.Network.ReplyDelay = spec.Uniform(0, hi)
		say("reply delay 0-%s", history.FormatDuration(hi))
	}
	if drawn(SwarmRetry) && sc.Network.RetryAfter == 0 {
		sc.Network.RetryAfter, sc.Network.MaxRetries = 4*hi+time.Millisecond, 3
		say("3 retries %s apart", history.FormatDuration(sc.Network.RetryAfter))
	}
	if drawn(SwarmDrift) {
		sc.Clocks.DriftPPM = spec.Range{Min: min(d.driftLow, 0), Max: max(d.driftLow, 0)}
		say("drift %.0f to %.0f ppm", sc.Clocks.DriftPPM.Min, sc.Clocks.DriftPPM.Max)
	}
	if drawn(SwarmSkew) {
		sc.ClockSkew = 0
		need := time.Duration(float64(sc.TTL)*-sc.Clocks.DriftPPM.Min/1e6) + time.Microsecond
		if d.covered {
			sc.ClockSkew = min(need, sc.TTL/2)
		}
		say("skew budget %s", history.FormatDuration(sc.ClockSkew))
	}
	if drawn(SwarmStall) {
		sc.Agent.Stall.TailP = d.tailP
		sc.Agent.Stall.TailMin = sc.TTL / 2
		sc.Agent.Stall.TailMax = time.Duration(d.tailMax * float64(sc.TTL))
		say("stall tail %.1f%% %s-%s", 100*d.tailP, history.FormatDuration(sc.Agent.Stall.TailMin), history.FormatDuration(sc.Agent.Stall.TailMax))
	}
	if drawn(SwarmRestarts) {
		sc.Restarts = d.restarts
		say("%s", describeRestarts(d.restarts))
	}
	if drawn(SwarmPush) {
		sc.Push.Enabled = d.push
		say("push %s", map[bool]string{true: "on", false: "off"}[d.push])
	}
	if drawn(SwarmPushDelay) && sc.Push.Enabled && sc.Push.Delay == (spec.Dist{}) {
		sc.Push.Delay = spec.Uniform(0, hi)
		say("push delay 0-%s", history.FormatDuration(hi))
	}
	if len(said) > 0 {
		what := fmt.Sprintf("swarm seed %d drew %s", seed, strings.Join(said, ", "))
		if sc.Description == "" {
			sc.Description = what
		} else {
			sc.Description += "; " + what
		}
	}
	return sc
}

func describeRestarts(rs []spec.Restart) string {
	if len(rs) == 0 {
		return "no restart"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = history.FormatDuration(r.At) + map[bool]string{true: " persisted", false: " counter lost"}[r.Persist]
	}
	return history.Plural(len(rs), "restart", "restarts") + " (" + strings.Join(parts, ", ") + ")"
}

// SwarmOptions configures Swarm.
type SwarmOptions struct {
	Seeds     int    // how many seeds
	FirstSeed uint64 // seeds run FirstSeed, FirstSeed+1, ...
	Jobs      int    // parallel runs; 0 means GOMAXPROCS
	Ranges    *SwarmRanges
	// Progress, if set, is called after each seed with the count done.
	Progress func(done, total int)
}

// SwarmFailure is a seed whose fenced mode broke an invariant, or on which
// the library returned an error it never should.
type SwarmFailure struct {
	Seed       uint64        `json:"seed"`
	Scenario   spec.Scenario `json:"scenario"`
	Violations []string      `json:"violations"`
}

// SwarmResult summarises a swarm.
type SwarmResult struct {
	Seeds            int            `json:"seeds"`
	Failures         []SwarmFailure `json:"failures"`
	NaiveStaleWrites int            `json:"naive_stale_writes"`
	NaiveSeedsStale  int            `json:"naive_seeds_with_stale_writes"`
	FencedRefusals   int            `json:"fenced_refusals"`
	Events           uint64         `json:"events"`
	Elapsed          time.Duration  `json:"elapsed_ns"`
}

// EventsPerSecond is the swarm's throughput over all its jobs.
func (r *SwarmResult) EventsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Events) / r.Elapsed.Seconds()
}

// Swarm runs base over many seeds, each with its own knobs drawn by
// SwarmScenario, both modes each, on Jobs goroutines. Failures come back in
// seed order. If ctx ends it returns what it had, with ctx.Err().
func Swarm(ctx context.Context, base spec.Scenario, opts SwarmOptions) (*SwarmResult, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	ranges := DefaultSwarmRanges
	if opts.Ranges != nil {
		ranges = *opts.Ranges
	}
	start := time.Now()
	results := make([]*Result, opts.Seeds)
	scenarios := make([]spec.Scenario, opts.Seeds)
	err := Parallel(ctx, opts.Seeds, opts.Jobs, func(i int) error {
		sc := SwarmScenario(base, ranges, opts.FirstSeed+uint64(i))
		res, err := Run(ctx, sc, RunOptions{})
		if err != nil {
			return err
		}
		results[i], scenarios[i] = res, sc
		return nil
	}, opts.Progress)
	out := &SwarmResult{Elapsed: time.Since(start)}
	for i, res := range results {
		if res == nil {
			continue
		}
		out.Seeds++
		out.Events += res.Events
		if n := res.Modes[Naive]; n != nil {
			out.NaiveStaleWrites += n.StaleWritesLanded
			if n.StaleWritesLanded > 0 {
				out.NaiveSeedsStale++
			}
		}
		if f := res.Modes[Fenced]; f != nil {
			out.FencedRefusals += f.CommitsRefused
		}
		if res.Failed() {
			out.Failures = append(out.Failures, SwarmFailure{Seed: scenarios[i].Seed, Scenario: scenarios[i], Violations: res.Violations()})
		}
	}
	return out, err
}

// Parallel calls do(i) for every i from 0 to n-1, on at most jobs
// goroutines (GOMAXPROCS when jobs <= 0), each taking the next index as it
// finishes one: the pool that runs seeds side by side. After each call
// that succeeds it calls progress, if set, with how many have succeeded;
// progress and do are called from the pool's goroutines.
//
// Once ctx ends or a call fails, no index is handed out any more; calls
// under way are waited for. It returns the first error a call returned
// while ctx was live, else ctx.Err() if ctx ended before every index was
// done, else nil. Results are do's to keep, by index: the order calls run
// in is not the order of the indices.
func Parallel(ctx context.Context, n, jobs int, do func(i int) error, progress func(done, total int)) error {
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	var (
		next, done atomic.Int64
		stop       atomic.Bool
		errOnce    sync.Once
		firstErr   error
		wg         sync.WaitGroup
	)
	for range min(jobs, n) {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					stop.Store(true)
					// A call that failed because ctx ended says nothing
					// ctx.Err() does not.
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = err })
					}
					return
				}
				d := int(done.Add(1))
				if progress != nil {
					progress(d, n)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if int(done.Load()) < n {
		return ctx.Err()
	}
	return nil
}
