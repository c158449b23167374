package harness

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
	Seeds     int    // how many seeds the whole swarm has (every shard of it)
	FirstSeed uint64 // seeds run FirstSeed, FirstSeed+1, ...
	// Shard, if its Count is set, runs only that slice of the seeds.
	Shard  SwarmShard
	Jobs   int // parallel runs; 0 means GOMAXPROCS
	Ranges *SwarmRanges
	// Modes are the contenders each seed runs (default: naive and fenced).
	Modes []history.Mode
	// Progress, if set, is called after each seed with the count done.
	Progress func(done, total int)
	// Reproduce, if set, returns the command that reproduces a seed: the
	// result's failures and first counterexamples carry it.
	Reproduce func(seed uint64) string
}

// SwarmShard is one of Count disjoint slices of a swarm's seeds: the seeds
// whose position in the swarm (0 for the first seed) is Index modulo
// Count, Index counting from 0 (as a Kubernetes Indexed Job's
// JOB_COMPLETION_INDEX does). The slices interleave rather than cut the
// range in blocks, so that every shard starts on the swarm's first seeds:
// n machines reach a low failing seed n times sooner than one. The zero
// SwarmShard is the whole swarm.
type SwarmShard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ErrBadShard is returned for a shard that is not one of its swarm's, and
// for shards that do not make up one swarm when merged.
var ErrBadShard = errors.New("bad swarm shard")

func (s SwarmShard) whole() bool { return s.Count == 0 }

func (s SwarmShard) validate() error {
	if s.whole() {
		return nil
	}
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("%w: shard %d/%d: the index must be 0 to count-1 and the count at least 1", ErrBadShard, s.Index, s.Count)
	}
	return nil
}

// Len returns how many of a swarm's seeds this shard has.
func (s SwarmShard) Len(seeds int) int {
	if s.whole() {
		return seeds
	}
	if s.Index >= seeds {
		return 0
	}
	return (seeds-s.Index-1)/s.Count + 1
}

// Seeds returns the seeds of this shard of a swarm of seeds seeds from
// first, in the order the shard runs them.
func (s SwarmShard) Seeds(first uint64, seeds int) []uint64 {
	index, count := s.Index, s.Count
	if s.whole() {
		index, count = 0, 1
	}
	var out []uint64
	for pos := index; pos < seeds; pos += count {
		out = append(out, first+uint64(pos))
	}
	return out
}

// SwarmFailure is a seed whose fenced mode broke an invariant, or on which
// the library returned an error it never should.
type SwarmFailure struct {
	Seed       uint64        `json:"seed"`
	Scenario   spec.Scenario `json:"scenario"`
	Violations []string      `json:"violations"`
	Digest     string        `json:"digest"`
	Reproduce  string        `json:"reproduce,omitempty"`
}

// SwarmFirst is a mode's first counterexample in a swarm: the lowest seed
// on which that mode showed one (ShowsCounterexample), with how many seeds
// and how much wall time the swarm had spent when it had it.
type SwarmFirst struct {
	Seed uint64 `json:"seed"`
	// SeedsRun counts the seeds the swarm had run to reach this one, it
	// included: its position in the seeds from the first. In a shard it
	// counts the shard's own seeds; merged, the whole swarm's.
	SeedsRun int `json:"seeds_run"`
	// Wall is the wall time from the swarm's (or its shard's) start until
	// this seed's run was done.
	Wall      time.Duration `json:"wall_ns"`
	Digest    string        `json:"digest"` // the run's, as lab run prints it
	Reproduce string        `json:"reproduce,omitempty"`
}

// ShowsCounterexample reports whether a mode's report counts as a failing
// seed for time to first counterexample: the mode broke an invariant it
// promises, the library returned an error it never should, or a stale
// write landed (what a naive mode is there to show).
func ShowsCounterexample(rep *history.Report) bool {
	return len(rep.Violations) > 0 || rep.StaleWritesLanded > 0
}

// SwarmResult summarises a swarm, or one shard of it.
type SwarmResult struct {
	Scenario string `json:"scenario"` // the base scenario's name
	// Base identifies the swarm's base scenario and ranges (a hash of
	// both), so that only shards of one swarm merge.
	Base string `json:"base_digest"`
	// FirstSeed and LastSeed bound the whole swarm's seeds, every shard's.
	FirstSeed uint64 `json:"first_seed"`
	LastSeed  uint64 `json:"last_seed"`
	// Shard is the slice of the seeds this result covers; nil for the
	// whole swarm (run whole, or merged from its shards).
	Shard            *SwarmShard    `json:"shard,omitempty"`
	Seeds            int            `json:"seeds"` // the seeds that ran
	Failures         []SwarmFailure `json:"failures"`
	NaiveStaleWrites int            `json:"naive_stale_writes"`
	NaiveSeedsStale  int            `json:"naive_seeds_with_stale_writes"`
	FencedRefusals   int            `json:"fenced_refusals"`
	Events           uint64         `json:"events"`
	// Elapsed is the swarm's wall time; merged, the longest shard's (the
	// shards are taken to have run side by side).
	Elapsed time.Duration `json:"elapsed_ns"`
	// FirstCounterexample has an entry for every mode run: its first
	// counterexample, or nil if no seed showed one.
	FirstCounterexample map[history.Mode]*SwarmFirst `json:"first_counterexample"`
}

// Share is how many seeds r was to run: its shard's share of the swarm's
// seeds, or all of them for a whole swarm. A result with fewer Seeds than
// its Share was interrupted.
func (r *SwarmResult) Share() int {
	all := int(r.LastSeed-r.FirstSeed) + 1
	if r.Shard != nil {
		return r.Shard.Len(all)
	}
	return all
}

// EventsPerSecond is the swarm's throughput over all its jobs.
func (r *SwarmResult) EventsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Events) / r.Elapsed.Seconds()
}

// SeedsPerSecond is how many seeds the swarm ran a wall second, over all
// its jobs (merged: all its shards).
func (r *SwarmResult) SeedsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Seeds) / r.Elapsed.Seconds()
}

// Swarm runs base over many seeds, each with its own knobs drawn by
// SwarmScenario, both modes each, on Jobs goroutines: every seed of the
// swarm, or the slice opts.Shard names. Failures come back in seed order.
// If ctx ends it returns what it had, with ctx.Err().
func Swarm(ctx context.Context, base spec.Scenario, opts SwarmOptions) (*SwarmResult, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	if err := opts.Shard.validate(); err != nil {
		return nil, err
	}
	ranges := DefaultSwarmRanges
	if opts.Ranges != nil {
		ranges = *opts.Ranges
	}
	seeds := opts.Shard.Seeds(opts.FirstSeed, opts.Seeds)
	start := time.Now()
	results := make([]*history.Result, len(seeds))
	scenarios := make([]spec.Scenario, len(seeds))
	walls := make([]time.Duration, len(seeds))
	err := Parallel(ctx, len(seeds), opts.Jobs, func(i int) error {
		sc := SwarmScenario(base, ranges, seeds[i])
		res, err := Run(ctx, sc, RunOptions{Modes: opts.Modes})
		if err != nil {
			return err
		}
		results[i], scenarios[i], walls[i] = res, sc, time.Since(start)
		return nil
	}, opts.Progress)
	out := &SwarmResult{Scenario: base.Name, Base: swarmBase(base, ranges, opts.Modes), FirstSeed: opts.FirstSeed, LastSeed: opts.FirstSeed + uint64(max(opts.Seeds, 1)-1),
		Elapsed: time.Since(start), FirstCounterexample: map[history.Mode]*SwarmFirst{}}
	if !opts.Shard.whole() {
		out.Shard = &opts.Shard
	}
	reproduce := func(seed uint64) string {
		if opts.Reproduce == nil {
			return ""
		}
		return opts.Reproduce(seed)
	}
	for i, res := range results {
		if res == nil {
			continue
		}
		out.Seeds++
		out.Events += res.Events
		if n := res.Modes[history.Naive]; n != nil {
			out.NaiveStaleWrites += n.StaleWritesLanded
			if n.StaleWritesLanded > 0 {
				out.NaiveSeedsStale++
			}
		}
		if f := res.Modes[history.Fenced]; f != nil {
			out.FencedRefusals += f.CommitsRefused
		}
		if res.Failed() {
			out.Failures = append(out.Failures, SwarmFailure{Seed: seeds[i], Scenario: scenarios[i], Violations: res.Violations(),
				Digest: res.Digest, Reproduce: reproduce(seeds[i])})
		}
		for m, rep := range res.Modes {
			if _, seen := out.FirstCounterexample[m]; !seen {
				out.FirstCounterexample[m] = nil
			}
			if out.FirstCounterexample[m] == nil && ShowsCounterexample(rep) {
				out.FirstCounterexample[m] = &SwarmFirst{Seed: seeds[i], SeedsRun: i + 1, Wall: walls[i], Digest: res.Digest, Reproduce: reproduce(seeds[i])}
			}
		}
	}
	return out, err
}

// swarmBase is 16 hex digits of a hash of what a swarm runs but for the
// seeds: its base scenario, its ranges and the modes it runs (none named
// for the default, so that a default swarm's hash is as it always was).
func swarmBase(base spec.Scenario, ranges SwarmRanges, modes []history.Mode) string {
	b, err := json.Marshal(struct {
		Base   spec.Scenario
		Ranges SwarmRanges
		Modes  []history.Mode `json:",omitempty"`
	}{base, ranges, modes})
	if err != nil {
		panic(fmt.Sprintf("harness: a scenario that does not marshal: %v", err)) // a validated scenario always does
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// MergeSwarms combines the results of every shard of one swarm into the
// result the whole swarm would have had run on one machine, seed for seed:
// the counts summed, the failures in seed order, each mode's first
// counterexample the lowest seed of any shard's (its SeedsRun counted over
// the whole swarm's seeds), and the wall time the longest shard's. The
// shards must be all of one swarm's (the same scenario, ranges, seeds and
// count), each exactly once, and each must hold only its own seeds; else
// the error is ErrBadShard. A shard that ran fewer seeds than its Share
// leaves the merged result as short (its Seeds below its Share): the
// caller says it was interrupted, or refuses a shard that does not say so.
func MergeSwarms(parts []*SwarmResult) (*SwarmResult, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: nothing to merge", ErrBadShard)
	}
	first := parts[0]
	out := &SwarmResult{Scenario: first.Scenario, Base: first.Base, FirstSeed: first.FirstSeed, LastSeed: first.LastSeed,
		FirstCounterexample: map[history.Mode]*SwarmFirst{}}
	seen := make(map[int]bool, len(parts))
	for n, p := range parts {
		if err := p.checkShardOf(first); err != nil {
			return nil, fmt.Errorf("result %d: %w", n+1, err)
		}
		if seen[p.Shard.Index] {
			return nil, fmt.Errorf("%w: shard %d/%d is given twice", ErrBadShard, p.Shard.Index, p.Shard.Count)
		}
		seen[p.Shard.Index] = true
		out.Seeds += p.Seeds
		out.Failures = append(out.Failures, p.Failures...)
		out.NaiveStaleWrites += p.NaiveStaleWrites
		out.NaiveSeedsStale += p.NaiveSeedsStale
		out.FencedRefusals += p.FencedRefusals
		out.Events += p.Events
		out.Elapsed = max(out.Elapsed, p.Elapsed)
		for m, f := range p.FirstCounterexample {
			have, ok := out.FirstCounterexample[m]
			if !ok || (f != nil && (have == nil || f.Seed < have.Seed)) {
				out.FirstCounterexample[m] = f
			}
		}
	}
	// Fewer results than shards leave one missing among the first
	// len(parts)+1 indices.
	for i := range min(first.Shard.Count, len(parts)+1) {
		if !seen[i] {
			return nil, fmt.Errorf("%w: shard %d/%d is missing", ErrBadShard, i, first.Shard.Count)
		}
	}
	slices.SortFunc(out.Failures, func(a, b SwarmFailure) int { return cmp.Compare(a.Seed, b.Seed) })
	for m, f := range out.FirstCounterexample {
		if f != nil {
			whole := *f
			whole.SeedsRun = int(f.Seed-out.FirstSeed) + 1
			out.FirstCounterexample[m] = &whole
		}
	}
	return out, nil
}

// checkShardOf reports why r is not a shard of the swarm first is a shard
// of: a whole swarm, another swarm, another count, or seeds that are not
// its shard's (a result read from a file may say anything).
func (r *SwarmResult) checkShardOf(first *SwarmResult) error {
	switch {
	case r.Shard == nil || first.Shard == nil:
		return fmt.Errorf("%w: a whole swarm, not a shard", ErrBadShard)
	case r.Shard.Count < 1 || r.Shard.validate() != nil:
		return fmt.Errorf("%w: shard %d/%d: the index must be 0 to count-1 and the count at least 1", ErrBadShard, r.Shard.Index, r.Shard.Count)
	case r.Shard.Count != first.Shard.Count:
		return fmt.Errorf("%w: shard %d/%d, but result 1 is of %d shards", ErrBadShard, r.Shard.Index, r.Shard.Count, first.Shard.Count)
	case r.Scenario != first.Scenario || r.Base != first.Base:
		return fmt.Errorf("%w: a swarm of %s (base %s), but result 1 of %s (base %s): other scenarios or knob flags", ErrBadShard,
			r.Scenario, r.Base, first.Scenario, first.Base)
	case r.FirstSeed != first.FirstSeed || r.LastSeed != first.LastSeed:
		return fmt.Errorf("%w: seeds %d-%d, but result 1 of seeds %d-%d", ErrBadShard, r.FirstSeed, r.LastSeed, first.FirstSeed, first.LastSeed)
	case r.LastSeed < r.FirstSeed || r.LastSeed-r.FirstSeed >= math.MaxInt32:
		return fmt.Errorf("%w: seeds %d-%d are no swarm's", ErrBadShard, r.FirstSeed, r.LastSeed)
	case r.Seeds < 0 || r.Seeds > r.Share():
		return fmt.Errorf("%w: shard %d/%d ran %d seeds, more than it has", ErrBadShard, r.Shard.Index, r.Shard.Count, r.Seeds)
	}
	for _, f := range r.Failures {
		if !r.holds(f.Seed) {
			return fmt.Errorf("%w: shard %d/%d reports a failure of seed %d, which is not its own", ErrBadShard, r.Shard.Index, r.Shard.Count, f.Seed)
		}
	}
	for m, f := range r.FirstCounterexample {
		if f != nil && !r.holds(f.Seed) {
			return fmt.Errorf("%w: shard %d/%d reports a first %s counterexample at seed %d, which is not its own", ErrBadShard, r.Shard.Index, r.Shard.Count, m, f.Seed)
		}
	}
	return nil
}

// holds reports whether seed is one of the seeds of r's shard.
func (r *SwarmResult) holds(seed uint64) bool {
	if seed < r.FirstSeed || seed > r.LastSeed {
		return false
	}
	return (seed-r.FirstSeed)%uint64(r.Shard.Count) == uint64(r.Shard.Index)
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
