package spec

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// Scenario is everything that decides a run: the same Scenario (seed
// included) gives the same run, event for event. The zero values of the
// optional fields mean "off". Validate reports every field out of range.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Seed        uint64 `json:"seed"`
	// Duration is how long the run lasts in virtual (true) time.
	Duration time.Duration `json:"duration"`

	Agents    int        `json:"agents"`
	Resources int        `json:"resources"`
	Pick      PickPolicy `json:"pick,omitempty"` // how an agent picks the resource of its next attempt

	TTL time.Duration `json:"ttl"`
	// LockDelay is the coordinator's lock-delay
	// (leasefence.CoordinatorOptions.LockDelay): after a lease expires
	// unreleased, the coordinator refuses the resource to everyone for this
	// long, so that a stalled holder's write in flight most likely lands
	// before the next holder begins. 0 is none; at most
	// leasefence.MaxLockDelay. Every backend gives it to the lab's
	// coordinator; a library's lock has none, and refuses a scenario
	// with one.
	LockDelay time.Duration `json:"lock_delay,omitempty"`
	// ClockSkew is every client's ClockSkew: the drift budget subtracted
	// from each deadline.
	ClockSkew time.Duration `json:"clock_skew,omitempty"`

	Agent   Behaviour `json:"agent"`
	Network Network   `json:"network,omitempty"`
	Clocks  Clocks    `json:"clocks,omitempty"`

	Partitions []Partition `json:"partitions,omitempty"`
	Restarts   []Restart   `json:"restarts,omitempty"`
	// Crashes kill agents outright (agents as processes only: see Crash).
	Crashes []Crash `json:"crashes,omitempty"`
	Push    Push    `json:"push,omitempty"`
	// Etcd is the embedded etcd cluster's size (the real-time etcd
	// backend only).
	Etcd Etcd `json:"etcd,omitempty"`
	// Faults are the faults of a backend's own servers, at instants of
	// the run: an etcd member's, the Redis primary's (see TimedFault).
	// Only a backend whose registry entry plays a kind plays it.
	Faults []TimedFault `json:"faults,omitempty"`
	// Forgers write with proofs they made up, one forger per entry (see
	// Forgery); only a resource that verifies proofs can play them.
	Forgers []Forgery `json:"forgers,omitempty"`

	// Script replaces the behaviour of the agents it names with exact
	// actions at exact instants; unnamed agents behave as Agent says.
	Script []Action `json:"script,omitempty"`
	// Interventions are live interventions recorded during a paced run,
	// replayed at the virtual instants they were made.
	Interventions []history.Intervention `json:"interventions,omitempty"`
}

// PickPolicy says how an agent chooses the resource of each attempt.
type PickPolicy string

// The pick policies.
const (
	// PickRandom draws a resource uniformly for every attempt (the default).
	PickRandom PickPolicy = "random"
	// PickFixed binds agent i to resource i mod Resources.
	PickFixed PickPolicy = "fixed"
	// PickRoundRobin walks the resources in order, from a start that
	// depends on the agent.
	PickRoundRobin PickPolicy = "round-robin"
)

// Behaviour is what an unscripted agent does, in a loop: think, acquire,
// then for each write check its lease, stall, and write; renew when the
// renewal point comes; after the last write release or let the lease lapse.
type Behaviour struct {
	Think          Dist `json:"think"`              // between attempts, and after a denial when the outcome gives no retry hint
	Stall          Dist `json:"stall"`              // between the validity check and the write: the gap
	WorkGap        Dist `json:"work_gap,omitempty"` // between two writes of one lease
	WritesPerLease int  `json:"writes_per_lease"`   // >= 1
	// RenewAt renews when this fraction of the TTL has passed since the
	// lease was anchored (0 never renews; 0.5 renews at half-life).
	RenewAt float64 `json:"renew_at,omitempty"`
	// Release releases the lease after the last write; otherwise the agent
	// lets it expire.
	Release bool `json:"release,omitempty"`
}

// Network is the agent-to-coordinator link, and the client's retries.
type Network struct {
	RequestDelay Dist    `json:"request_delay,omitempty"`
	ReplyDelay   Dist    `json:"reply_delay,omitempty"`
	DropRequests float64 `json:"drop_requests,omitempty"` // probability, [0,1]
	DropReplies  float64 `json:"drop_replies,omitempty"`  // probability, [0,1]
	Duplicate    float64 `json:"duplicate,omitempty"`     // probability a request is delivered twice
	// RetryAfter is how long a client waits for an acquire reply before it
	// resends the same request (same request id); 0 never retries, and the
	// agent gives up waiting after 4 x the TTL.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	MaxRetries int           `json:"max_retries,omitempty"`
	// WriteDelay delays each write request on its way to the resource:
	// the write slow on the wire, after the check passed. Only a resource
	// across a network can play it.
	WriteDelay Dist `json:"write_delay,omitempty"`
}

// Clocks sets how each agent's clock relates to true time: reading =
// offset + true*(1 + ppm/1e6). Each agent draws its drift and offset
// uniformly from the ranges (with the run's seed); Agent overrides by name.
type Clocks struct {
	DriftPPM Range                 `json:"drift_ppm,omitempty"`
	Offset   DurationRange         `json:"offset,omitempty"`
	Agent    map[string]AgentClock `json:"agent,omitempty"`
	// CoordinatorDriftPPM is the coordinator's own drift.
	CoordinatorDriftPPM float64 `json:"coordinator_drift_ppm,omitempty"`
}

// AgentClock pins one agent's clock.
type AgentClock struct {
	DriftPPM float64       `json:"drift_ppm"`
	Offset   time.Duration `json:"offset"`
}

// Range is a closed interval of numbers.
type Range struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// DurationRange is a closed interval of durations.
type DurationRange struct {
	Min time.Duration `json:"min"`
	Max time.Duration `json:"max"`
}

// Partition cuts one agent off from the coordinator (both directions)
// from From until To.
type Partition struct {
	Agent string        `json:"agent"`
	From  time.Duration `json:"from"`
	To    time.Duration `json:"to"`
}

// Restart restarts the coordinator at At. With Persist the new coordinator
// resumes from the last IssuedFence; without it, from zero, and it reissues
// fences the resources have already superseded.
type Restart struct {
	At      time.Duration `json:"at"`
	Persist bool          `json:"persist,omitempty"`
}

// Crash is agent Agent crashing at At: SIGKILL of its process, in every
// mode, so that it loses everything it held in memory, its lease
// included, and renews nothing; with Restart above 0 a new process for it
// starts that long after, as a supervisor would start it, and the agent
// begins afresh. Only agents run as processes can crash (a run of agents
// as goroutines, or the simulator, refuses a scenario with crashes:
// ErrNeedsProcesses).
type Crash struct {
	Agent   string        `json:"agent"`
	At      time.Duration `json:"at"`
	Restart time.Duration `json:"restart,omitempty"`
}

// ErrNeedsProcesses refuses a scenario with crashes where its agents are
// not processes: the simulator, and agents as goroutines.
var ErrNeedsProcesses = errors.New("crashes need agents run as processes (--agents-as process, agents: process)")

// Push is the coordinator pushing each newly minted fence to the resource's
// gate (FenceGate.Admit), which closes most of the window in which a stale
// holder can write before the new holder has.
type Push struct {
	Enabled bool    `json:"enabled,omitempty"`
	Delay   Dist    `json:"delay,omitempty"`
	Drop    float64 `json:"drop,omitempty"`
}

// Dist is a distribution of durations with an optional long tail: mostly
// uniform in [Min, Max], and with probability TailP uniform in
// [TailMin, TailMax] instead (a model call that takes longer than the
// lease). Min == Max is a constant; the zero Dist is always 0. With
// LogNormal set (On), the distribution is that log-normal instead, and the
// other fields must be zero.
type Dist struct {
	Min       time.Duration `json:"min,omitempty"`
	Max       time.Duration `json:"max,omitempty"`
	TailP     float64       `json:"tail_p,omitempty"`
	TailMin   time.Duration `json:"tail_min,omitempty"`
	TailMax   time.Duration `json:"tail_max,omitempty"`
	LogNormal LogNormal     `json:"lognormal,omitzero"`
}

// LogNormal is the heavy-tailed distribution of a model call's latency (or
// any service time with rare long stalls): exp of a normal, given by its
// median and its 99th percentile, which fix the normal's mean ln(Median)
// and standard deviation sigma = ln(P99/Median)/z99 (z99 = 2.3263, the
// standard normal's 99th percentile). Its mean is Median*exp(sigma²/2):
// with median 300ms and p99 4s, sigma is 1.11 and the mean 560ms, and one
// draw in 100 is above 4s, one in 1000 above about 9.4s. A draw is capped
// at MaxDuration, so that a run's arithmetic stays bounded.
type LogNormal struct {
	Median time.Duration `json:"median"`
	P99    time.Duration `json:"p99"`
}

// On reports whether l is set: the zero LogNormal is none.
func (l LogNormal) On() bool { return l != LogNormal{} }

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// Sigma is the standard deviation of ln of a draw.
func (l LogNormal) Sigma() float64 {
	return math.Log(float64(l.P99)/float64(l.Median)) / z99
}

// Const is the distribution that is always d.
func Const(d time.Duration) Dist { return Dist{Min: d, Max: d} }

// Uniform is the distribution uniform in [lo, hi].
func Uniform(lo, hi time.Duration) Dist { return Dist{Min: lo, Max: hi} }

// ActionKind is one step of a scripted timeline.
type ActionKind string

// The scripted actions.
const (
	ActAcquire ActionKind = "acquire" // send an acquire for Resource, unless one is still unanswered
	ActCheck   ActionKind = "check"   // the validity check (HasExpired, or the naive now < expiresAt)
	ActStall   ActionKind = "stall"   // stalled for Duration (a GC pause, a model call)
	ActWrite   ActionKind = "write"   // write, if the last check passed
	ActRenew   ActionKind = "renew"   // send a renewal of the current lease
	ActRelease ActionKind = "release" // send a release of the current lease
)

// Action is one scripted step: agent Agent does Do at virtual instant At.
// RequestDelay and ReplyDelay, when set, replace the network's draw for the
// message this action sends.
type Action struct {
	At           time.Duration  `json:"at"`
	Agent        string         `json:"agent"`
	Do           ActionKind     `json:"do"`
	Resource     string         `json:"resource,omitempty"` // acquire: defaults to the first resource
	Duration     time.Duration  `json:"duration,omitempty"` // stall
	RequestDelay *time.Duration `json:"request_delay,omitempty"`
	ReplyDelay   *time.Duration `json:"reply_delay,omitempty"`
}

// Limits on a scenario, to refuse runs that would not finish or not fit.
const (
	MaxAgents    = 100_000
	MaxResources = 100_000
	MaxDuration  = 24 * time.Hour
	// MaxDuration bounds a run, and every duration and clock offset in it.
	// MaxDriftPPM keeps clock arithmetic exact: 10% fast or slow.
	MaxDriftPPM = 100_000
)

// ErrInvalidScenario is wrapped by every error Validate returns.
var ErrInvalidScenario = errors.New("invalid scenario")

// FieldError names the scenario field that is out of range.
type FieldError struct {
	Field   string // as spelled in a scenario file, e.g. "network.drop_replies"
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Is reports whether target is ErrInvalidScenario.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidScenario }

// AgentName is the name of agent i (0-based): "agent-1", "agent-2", ...
func AgentName(i int) string { return fmt.Sprintf("agent-%d", i+1) }

// ResourceName is the name of resource i (0-based): "res-1", "res-2", ...
func ResourceName(i int) string { return fmt.Sprintf("res-%d", i+1) }

// Validate returns nil or an error joining one *FieldError per problem.
//
// Every duration is bounded by the arithmetic it feeds, so that nothing
// that validates can overflow: each is at most MaxDuration (a run's
// longest), and so is every clock offset, so that an instant is at most a
// few days from the run's start on any clock, however it drifts, whatever
// is added to it (a TTL, a stall, a retry wait of 4 x the TTL).
func (s *Scenario) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	s.validateRun(bad)
	s.validateBehaviour(bad)
	s.validateNetwork(bad)
	s.validateClocks(bad)
	s.validateFaults(bad)
	s.validateTimed(bad)
	s.validateEtcd(bad)
	s.validateForgers(bad)
	for i, a := range s.Script {
		s.validateAction(bad, fmt.Sprintf("script[%d]", i), a)
	}
	for i, iv := range s.Interventions {
		if err := s.CheckIntervention(iv); err != nil {
			bad(fmt.Sprintf("interventions[%d]", i), "%v", err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}

// complaint records one problem with one field.
type complaint func(field, format string, args ...any)

func (s *Scenario) validateRun(bad complaint) {
	if s.Name == "" {
		bad("name", "is required")
	}
	if s.Duration <= 0 || s.Duration > MaxDuration {
		bad("duration", "must be in (0, %v], got %v", MaxDuration, s.Duration)
	}
	if s.Agents < 1 || s.Agents > MaxAgents {
		bad("agents", "must be in [1, %d], got %d", MaxAgents, s.Agents)
	}
	if s.Resources < 1 || s.Resources > MaxResources {
		bad("resources", "must be in [1, %d], got %d", MaxResources, s.Resources)
	}
	switch s.Pick {
	case "", PickRandom, PickFixed, PickRoundRobin:
	default:
		bad("pick", "must be random, fixed or round-robin, got %q", s.Pick)
	}
	if s.TTL <= 0 || s.TTL > MaxDuration {
		bad("ttl", "must be in (0, %v], got %v", MaxDuration, s.TTL)
	}
	if s.LockDelay < 0 || s.LockDelay > leasefence.MaxLockDelay {
		bad("lock_delay", "must be in [0, %v], got %v", leasefence.MaxLockDelay, s.LockDelay)
	}
	if s.ClockSkew < 0 || (s.TTL > 0 && s.ClockSkew >= s.TTL) {
		bad("clock_skew", "must be in [0, ttl), got %v", s.ClockSkew)
	}
}

func (s *Scenario) validateBehaviour(bad complaint) {
	checkDist(bad, "agent.think", s.Agent.Think)
	checkDist(bad, "agent.stall", s.Agent.Stall)
	checkDist(bad, "agent.work_gap", s.Agent.WorkGap)
	if s.Agent.WritesPerLease < 1 {
		bad("agent.writes_per_lease", "must be >= 1, got %d", s.Agent.WritesPerLease)
	}
	if !(s.Agent.RenewAt >= 0 && s.Agent.RenewAt < 1) {
		bad("agent.renew_at", "must be in [0, 1), got %v", s.Agent.RenewAt)
	}
}

func (s *Scenario) validateNetwork(bad complaint) {
	n := s.Network
	checkDist(bad, "network.request_delay", n.RequestDelay)
	checkDist(bad, "network.reply_delay", n.ReplyDelay)
	checkProb(bad, "network.drop_requests", n.DropRequests)
	checkProb(bad, "network.drop_replies", n.DropReplies)
	checkProb(bad, "network.duplicate", n.Duplicate)
	checkDuration(bad, "network.retry_after", n.RetryAfter)
	checkDist(bad, "network.write_delay", n.WriteDelay)
	if n.MaxRetries < 0 {
		bad("network.max_retries", "must be >= 0, got %d", n.MaxRetries)
	}
}

func (s *Scenario) validateClocks(bad complaint) {
	c := s.Clocks
	checkPPM(bad, "clocks.drift_ppm.min", c.DriftPPM.Min)
	checkPPM(bad, "clocks.drift_ppm.max", c.DriftPPM.Max)
	if c.DriftPPM.Min > c.DriftPPM.Max {
		bad("clocks.drift_ppm", "min %v is above max %v", c.DriftPPM.Min, c.DriftPPM.Max)
	}
	checkOffset(bad, "clocks.offset.min", c.Offset.Min)
	checkOffset(bad, "clocks.offset.max", c.Offset.Max)
	if c.Offset.Min > c.Offset.Max {
		bad("clocks.offset", "min %v is above max %v", c.Offset.Min, c.Offset.Max)
	}
	checkPPM(bad, "clocks.coordinator_drift_ppm", c.CoordinatorDriftPPM)
	for name, ac := range c.Agent {
		if _, ok := s.AgentIndex(name); !ok {
			bad("clocks.agent."+name, "names no agent (agents are agent-1 to agent-%d)", s.Agents)
		}
		checkPPM(bad, "clocks.agent."+name+".drift_ppm", ac.DriftPPM)
		checkOffset(bad, "clocks.agent."+name+".offset", ac.Offset)
	}
}

func (s *Scenario) validateFaults(bad complaint) {
	for i, p := range s.Partitions {
		f := fmt.Sprintf("partitions[%d]", i)
		if _, ok := s.AgentIndex(p.Agent); !ok {
			bad(f+".agent", "names no agent: %q", p.Agent)
		}
		if p.From < 0 || p.To <= p.From || p.To > MaxDuration {
			bad(f, "needs 0 <= from < to <= %v, got from %v to %v", MaxDuration, p.From, p.To)
		}
	}
	for i, r := range s.Restarts {
		if r.At <= 0 || r.At > s.Duration {
			bad(fmt.Sprintf("restarts[%d].at", i), "must be in (0, duration], got %v", r.At)
		}
	}
	for i, c := range s.Crashes {
		f := fmt.Sprintf("crashes[%d]", i)
		if _, ok := s.AgentIndex(c.Agent); !ok {
			bad(f+".agent", "names no agent: %q", c.Agent)
		}
		if c.At <= 0 || c.At > s.Duration {
			bad(f+".at", "must be in (0, duration], got %v", c.At)
		}
		if c.Restart < 0 || c.Restart > MaxDuration {
			bad(f+".restart", "must be in [0, %v] (0: the agent stays dead), got %v", MaxDuration, c.Restart)
		}
	}
	checkDist(bad, "push.delay", s.Push.Delay)
	checkProb(bad, "push.drop", s.Push.Drop)
}

func (s *Scenario) validateAction(bad complaint, f string, a Action) {
	if _, ok := s.AgentIndex(a.Agent); !ok {
		bad(f+".agent", "names no agent: %q", a.Agent)
	}
	if a.At < 0 || a.At > s.Duration {
		bad(f+".at", "must be in [0, duration], got %v", a.At)
	}
	switch a.Do {
	case ActAcquire:
		if a.Resource != "" {
			if _, ok := s.ResourceIndex(a.Resource); !ok {
				bad(f+".resource", "names no resource: %q", a.Resource)
			}
		}
	case ActStall:
		if a.Duration <= 0 || a.Duration > MaxDuration {
			bad(f+".duration", "a stall needs a duration in (0, %v], got %v", MaxDuration, a.Duration)
		}
	case ActCheck, ActWrite, ActRenew, ActRelease:
	default:
		bad(f+".do", "must be acquire, check, stall, write, renew or release, got %q", a.Do)
	}
	if a.RequestDelay != nil {
		checkDuration(bad, f+".request_delay", *a.RequestDelay)
	}
	if a.ReplyDelay != nil {
		checkDuration(bad, f+".reply_delay", *a.ReplyDelay)
	}
}

// CheckIntervention reports why iv cannot be applied to a run of s, or nil.
func (s *Scenario) CheckIntervention(iv history.Intervention) error {
	if iv.At < 0 || iv.At > MaxDuration {
		return fmt.Errorf("at must be in [0, %v], got %v", MaxDuration, iv.At)
	}
	switch iv.Kind {
	case history.StallAgent:
		if _, ok := s.AgentIndex(iv.Agent); !ok {
			return fmt.Errorf("names no agent: %q", iv.Agent)
		}
		if iv.Duration <= 0 || iv.Duration > MaxDuration {
			return fmt.Errorf("a stall needs a duration in (0, %v], got %v", MaxDuration, iv.Duration)
		}
	case history.SetDropRate:
		if !(iv.Value >= 0 && iv.Value <= 1) {
			return fmt.Errorf("drop rate must be in [0, 1], got %v", iv.Value)
		}
	case history.RestartCoordinator, history.TogglePush:
	default:
		return fmt.Errorf("unknown kind %q", iv.Kind)
	}
	return nil
}

func checkDist(bad complaint, field string, d Dist) {
	if l := d.LogNormal; l.On() {
		if d.Min != 0 || d.Max != 0 || d.TailP != 0 || d.TailMin != 0 || d.TailMax != 0 {
			bad(field, "a lognormal takes no min, max or tail: it is the whole distribution")
		}
		if l.Median <= 0 || l.Median > MaxDuration {
			bad(field+".lognormal.median", "must be in (0, %v], got %v", MaxDuration, l.Median)
		}
		if l.P99 < l.Median || l.P99 > MaxDuration {
			bad(field+".lognormal.p99", "must be in [median, %v], got %v", MaxDuration, l.P99)
		}
		return
	}
	if d.Min < 0 || d.Max < d.Min {
		bad(field, "needs 0 <= min <= max, got min %v max %v", d.Min, d.Max)
	}
	if d.Max > MaxDuration {
		bad(field+".max", "must be at most %v, got %v", MaxDuration, d.Max)
	}
	if !(d.TailP >= 0 && d.TailP <= 1) {
		bad(field+".tail_p", "must be in [0, 1], got %v", d.TailP)
	}
	if d.TailP > 0 && (d.TailMin < 0 || d.TailMax < d.TailMin) {
		bad(field, "needs 0 <= tail_min <= tail_max, got tail_min %v tail_max %v", d.TailMin, d.TailMax)
	}
	if d.TailP > 0 && d.TailMax > MaxDuration {
		bad(field+".tail_max", "must be at most %v, got %v", MaxDuration, d.TailMax)
	}
}

// checkDuration bounds a duration the run adds to an instant.
func checkDuration(bad complaint, field string, d time.Duration) {
	if d < 0 || d > MaxDuration {
		bad(field, "must be in [0, %v], got %v", MaxDuration, d)
	}
}

// checkOffset bounds a clock offset, either way.
func checkOffset(bad complaint, field string, d time.Duration) {
	if d < -MaxDuration || d > MaxDuration {
		bad(field, "must be within ±%v, got %v", MaxDuration, d)
	}
}

func checkProb(bad complaint, field string, p float64) {
	if !(p >= 0 && p <= 1) {
		bad(field, "must be a probability in [0, 1], got %v", p)
	}
}

func checkPPM(bad complaint, field string, ppm float64) {
	if math.IsNaN(ppm) || math.Abs(ppm) > MaxDriftPPM {
		bad(field, "must be within ±%d ppm, got %v", MaxDriftPPM, ppm)
	}
}

// AgentIndex maps "agent-N" back to N-1.
func (s *Scenario) AgentIndex(name string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(name, "agent-%d", &n); err != nil || AgentName(n-1) != name || n < 1 || n > s.Agents {
		return 0, false
	}
	return n - 1, true
}

// ResourceIndex maps "res-N" back to N-1.
func (s *Scenario) ResourceIndex(name string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(name, "res-%d", &n); err != nil || ResourceName(n-1) != name || n < 1 || n > s.Resources {
		return 0, false
	}
	return n - 1, true
}

// DriftWithinBudget reports whether the skew budget covers the worst
// clock drift of the scenario: the condition under which the client
// guarantees that a holder's window lies inside the coordinator's.
//
// An agent clock running at rate 1+a anchors at the send instant s and
// believes until s + (TTL-skew)/(1+a) in true time; a coordinator at rate
// 1+c processing at p >= s expires at p + TTL/(1+c). Containment for every
// p >= s needs skew >= TTL*(c-a)/(1+c), worst for the slowest agent.
func (s *Scenario) DriftWithinBudget() bool {
	slowest := s.Clocks.DriftPPM.Min
	for _, ac := range s.Clocks.Agent {
		slowest = math.Min(slowest, ac.DriftPPM)
	}
	c := s.Clocks.CoordinatorDriftPPM / 1e6
	need := float64(s.TTL) * (c - slowest/1e6) / (1 + c)
	return float64(s.ClockSkew) >= need
}
