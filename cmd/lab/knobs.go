package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// knob is a flag that changes one harness knob of the scenario. Knobs are
// applied after the scenario is loaded, in the order given, so a flag
// always wins over the file or the built-in.
type knob struct {
	name, metavar, usage string
	// field is the scenario field the knob sets, as Validate names it, so
	// that an out-of-range value is reported against the flag.
	field string
	// parse reads the flag's text into a change of the scenario; it checks
	// syntax, and Validate checks the range.
	parse  func(s string) (func(*spec.Scenario), error)
	isBool bool
	// list knobs (partitions, restarts) replace the scenario's list on
	// their first use and append on the next; "none" empties it.
	list bool
	// swarm is the knob a swarm draws per seed that the flag fixes for
	// every seed instead, or "".
	swarm harness.SwarmKnob
}

// knobs lists every harness knob a flag can set.
func knobs() []knob {
	return []knob{
		{name: "seed", metavar: "N", usage: "the run's seed (the same seed gives the same run, event for event)", field: "seed",
			parse: uintKnob(func(sc *spec.Scenario, v uint64) { sc.Seed = v })},
		{name: "agents", metavar: "N", usage: "how many agents", field: "agents",
			parse: intKnob(func(sc *spec.Scenario, v int) { sc.Agents = v })},
		{name: "resources", metavar: "N", usage: "how many resources", field: "resources",
			parse: intKnob(func(sc *spec.Scenario, v int) { sc.Resources = v })},
		{name: "duration", metavar: "D", usage: "how long the run lasts in virtual time, e.g. 30s", field: "duration",
			parse: durKnob(func(sc *spec.Scenario, v time.Duration) { sc.Duration = v })},
		{name: "pick", metavar: "POLICY", usage: "how an agent picks a resource: random, fixed or round-robin", field: "pick",
			parse: func(s string) (func(*spec.Scenario), error) {
				return func(sc *spec.Scenario) { sc.Pick = spec.PickPolicy(s) }, nil
			}},
		{name: "ttl", metavar: "D", usage: "the lease TTL", field: "ttl",
			parse: durKnob(func(sc *spec.Scenario, v time.Duration) { sc.TTL = v })},
		{name: "skew", swarm: harness.SwarmSkew, metavar: "D", usage: "every client's ClockSkew: the drift budget taken off each deadline", field: "clock_skew",
			parse: durKnob(func(sc *spec.Scenario, v time.Duration) { sc.ClockSkew = v })},
		{name: "think", metavar: "DIST", usage: "an agent's pause between attempts, e.g. 50ms-300ms", field: "agent.think",
			parse: distKnob(func(sc *spec.Scenario, d spec.Dist) { sc.Agent.Think = d })},
		{name: "stall", swarm: harness.SwarmStall, metavar: "DIST", usage: "the stall between the validity check and the write, e.g. 10ms-50ms,5%:1.5s-4s", field: "agent.stall",
			parse: distKnob(func(sc *spec.Scenario, d spec.Dist) { sc.Agent.Stall = d })},
		{name: "work-gap", metavar: "DIST", usage: "the pause between two writes of one lease", field: "agent.work_gap",
			parse: distKnob(func(sc *spec.Scenario, d spec.Dist) { sc.Agent.WorkGap = d })},
		{name: "writes", metavar: "N", usage: "writes per lease", field: "agent.writes_per_lease",
			parse: intKnob(func(sc *spec.Scenario, v int) { sc.Agent.WritesPerLease = v })},
		{name: "renew-at", metavar: "F", usage: "renew when this fraction of the TTL has passed (0 never renews)", field: "agent.renew_at",
			parse: floatKnob(func(sc *spec.Scenario, v float64) { sc.Agent.RenewAt = v })},
		{name: "release", usage: "release the lease after the last write (--release=false lets it expire)", field: "agent.release", isBool: true,
			parse: boolKnob(func(sc *spec.Scenario, v bool) { sc.Agent.Release = v })},
		{name: "request-delay", swarm: harness.SwarmRequestDelay, metavar: "DIST", usage: "network delay agent -> coordinator", field: "network.request_delay",
			parse: distKnob(func(sc *spec.Scenario, d spec.Dist) { sc.Network.RequestDelay = d })},
		{name: "reply-delay", swarm: harness.SwarmReplyDelay, metavar: "DIST", usage: "network delay coordinator -> agent", field: "network.reply_delay",
			parse: distKnob(func(sc *spec.Scenario, d spec.Dist) { sc.Network.ReplyDelay = d })},
		{name: "drop-requests", swarm: harness.SwarmDropRequests, metavar: "P", usage: "probability a request is lost, in [0, 1]", field: "network.drop_requests",
			parse: floatKnob(func(sc *spec.Scenario, v float64) { sc.Network.DropRequests = v })},
		{name: "drop-replies", swarm: harness.SwarmDropReplies, metavar: "P", usage: "probability a reply is lost, in [0, 1]", field: "network.drop_replies",
			parse: floatKnob(func(sc *spec.Scenario, v float64) { sc.Network.DropReplies = v })},
		{name: "duplicate", swarm: harness.SwarmDuplicate, metavar: "P", usage: "probability a request is delivered twice, in [0, 1]", field: "network.duplicate",
			parse: floatKnob(func(sc *spec.Scenario, v float64) { sc.Network.Duplicate = v })},
		{name: "retry-after", swarm: harness.SwarmRetry, metavar: "D", usage: "resend an unanswered acquire (same request id) after D; 0 never retries", field: "network.retry_after",
			parse: durKnob(func(sc *spec.Scenario, v time.Duration) { sc.Network.RetryAfter = v })},
		{name: "max-retries", swarm: harness.SwarmRetry, metavar: "N", usage: "how many times an acquire is resent", field: "network.max_retries",
			parse: intKnob(func(sc *spec.Scenario, v int) { sc.Network.MaxRetries = v })},
		{name: "drift-ppm", swarm: harness.SwarmDrift, metavar: "MIN:MAX", usage: "agent clock drift in ppm, drawn per agent; one value for all, e.g. -20000", field: "clocks.drift_ppm",
			parse: func(s string) (func(*spec.Scenario), error) {
				r, err := scenario.ParseRange(s)
				return func(sc *spec.Scenario) { sc.Clocks.DriftPPM = r }, err
			}},
		{name: "offset", metavar: "MIN:MAX", usage: "agent clock offset, drawn per agent, e.g. -50ms:50ms", field: "clocks.offset",
			parse: func(s string) (func(*spec.Scenario), error) {
				r, err := scenario.ParseDurationRange(s)
				return func(sc *spec.Scenario) { sc.Clocks.Offset = r }, err
			}},
		{name: "coordinator-drift-ppm", metavar: "PPM", usage: "the coordinator's own clock drift", field: "clocks.coordinator_drift_ppm",
			parse: floatKnob(func(sc *spec.Scenario, v float64) { sc.Clocks.CoordinatorDriftPPM = v })},
		{name: "partition", metavar: "AGENT@FROM-TO", usage: "cut an agent off the coordinator, e.g. agent-1@5s-15s (repeatable; none for no partitions)", field: "partitions", list: true,
			parse: partitionKnob},
		{name: "restart", swarm: harness.SwarmRestarts, metavar: "AT[:persist]", usage: "restart the coordinator at AT, keeping its fence counter with :persist (repeatable; none for no restarts)", field: "restarts", list: true,
			parse: restartKnob},
		{name: "push", swarm: harness.SwarmPush, usage: "the coordinator pushes each new fence to the gate (Admit)", field: "push.enabled", isBool: true,
			parse: boolKnob(func(sc *spec.Scenario, v bool) { sc.Push.Enabled = v })},
		{name: "push-delay", swarm: harness.SwarmPushDelay, metavar: "DIST", usage: "how long the push takes to reach the gate", field: "push.delay",
			parse: distKnob(func(sc *spec.Scenario, d spec.Dist) { sc.Push.Delay = d })},
		{name: "push-drop", metavar: "P", usage: "probability a push is lost", field: "push.drop",
			parse: floatKnob(func(sc *spec.Scenario, v float64) { sc.Push.Drop = v })},
	}
}

func uintKnob(set func(*spec.Scenario, uint64)) func(string) (func(*spec.Scenario), error) {
	return func(s string) (func(*spec.Scenario), error) {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, errors.New("must be an integer >= 0")
		}
		return func(sc *spec.Scenario) { set(sc, v) }, nil
	}
}

func intKnob(set func(*spec.Scenario, int)) func(string) (func(*spec.Scenario), error) {
	return func(s string) (func(*spec.Scenario), error) {
		v, err := strconv.Atoi(s)
		if err != nil {
			return nil, errors.New("must be an integer")
		}
		return func(sc *spec.Scenario) { set(sc, v) }, nil
	}
}

func floatKnob(set func(*spec.Scenario, float64)) func(string) (func(*spec.Scenario), error) {
	return func(s string) (func(*spec.Scenario), error) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, errors.New("must be a finite number")
		}
		return func(sc *spec.Scenario) { set(sc, v) }, nil
	}
}

func boolKnob(set func(*spec.Scenario, bool)) func(string) (func(*spec.Scenario), error) {
	return func(s string) (func(*spec.Scenario), error) {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return nil, errors.New("must be true or false")
		}
		return func(sc *spec.Scenario) { set(sc, v) }, nil
	}
}

func durKnob(set func(*spec.Scenario, time.Duration)) func(string) (func(*spec.Scenario), error) {
	return func(s string) (func(*spec.Scenario), error) {
		v, err := time.ParseDuration(s)
		if err != nil {
			return nil, errors.New("must be a duration such as 950ms or 1.5s")
		}
		return func(sc *spec.Scenario) { set(sc, v) }, nil
	}
}

func distKnob(set func(*spec.Scenario, spec.Dist)) func(string) (func(*spec.Scenario), error) {
	return func(s string) (func(*spec.Scenario), error) {
		d, err := scenario.ParseDist(s)
		if err != nil {
			return nil, err
		}
		return func(sc *spec.Scenario) { set(sc, d) }, nil
	}
}

// partitionKnob reads AGENT@FROM-TO.
func partitionKnob(s string) (func(*spec.Scenario), error) {
	agent, span, ok := strings.Cut(s, "@")
	from, to, ok2 := strings.Cut(span, "-")
	if !ok || !ok2 || agent == "" {
		return nil, errors.New("must be AGENT@FROM-TO, e.g. agent-1@5s-15s")
	}
	f, err1 := time.ParseDuration(from)
	t, err2 := time.ParseDuration(to)
	if err1 != nil || err2 != nil {
		return nil, errors.New("FROM and TO must be durations, e.g. agent-1@5s-15s")
	}
	p := spec.Partition{Agent: agent, From: f, To: t}
	return func(sc *spec.Scenario) { sc.Partitions = append(sc.Partitions, p) }, nil
}

// restartKnob reads AT, AT:persist or AT:lost.
func restartKnob(s string) (func(*spec.Scenario), error) {
	at, mode, hasMode := strings.Cut(s, ":")
	d, err := time.ParseDuration(at)
	if err != nil {
		return nil, errors.New("must be AT[:persist], e.g. 10s or 10s:persist")
	}
	r := spec.Restart{At: d}
	switch {
	case !hasMode || mode == "lost":
	case mode == "persist":
		r.Persist = true
	default:
		return nil, fmt.Errorf("%q must be persist or lost", mode)
	}
	return func(sc *spec.Scenario) { sc.Restarts = append(sc.Restarts, r) }, nil
}

// scenarioFlags chooses and changes the scenario of watch, run and swarm.
type scenarioFlags struct {
	maxEvents int64 // --max-events: the bound on the run's estimated work
	changes   []change
	given     []givenFlag // as typed, in order: for the command that reproduces a run
	listUsed  map[string]bool
}

type change struct {
	knob  *knob
	apply func(*spec.Scenario)
}

type givenFlag struct{ name, value string }

// register adds every knob flag to fs.
func (sf *scenarioFlags) register(fs *flag.FlagSet) {
	sf.listUsed = make(map[string]bool)
	fs.Int64Var(&sf.maxEvents, "max-events", spec.DefaultMaxEvents,
		"refuse a run estimated to make more than `N` events a mode before it starts (0: no bound)")
	for _, k := range knobs() {
		fs.Var(&knobValue{k: &k, sf: sf}, k.name, k.usage)
	}
}

type knobValue struct {
	k  *knob
	sf *scenarioFlags
}

func (v *knobValue) String() string { return "" }

func (v *knobValue) IsBoolFlag() bool { return v.k != nil && v.k.isBool }

func (v *knobValue) Set(s string) error {
	k, sf := v.k, v.sf
	var apply func(*spec.Scenario)
	if k.list && s == "none" {
		apply = func(*spec.Scenario) {}
	} else {
		var err error
		if apply, err = k.parse(s); err != nil {
			return err
		}
	}
	if k.list && !sf.listUsed[k.name] {
		sf.listUsed[k.name] = true
		add := apply
		apply = func(sc *spec.Scenario) {
			switch k.field {
			case "partitions":
				sc.Partitions = nil
			case "restarts":
				sc.Restarts = nil
			}
			add(sc)
		}
	}
	sf.changes = append(sf.changes, change{knob: k, apply: apply})
	sf.given = append(sf.given, givenFlag{k.name, s})
	return nil
}

// apply changes sc by every knob flag given, then validates it, reporting
// an out-of-range value against the flag that set it.
//
// The description then says which flags changed the scenario, so that a
// report never describes a scenario by what it was before the flags.
func (sf *scenarioFlags) apply(sc *spec.Scenario, source string) error {
	for _, c := range sf.changes {
		c.apply(sc)
	}
	var changedBy []string
	for _, g := range sf.given {
		if g.name != "seed" { // the same scenario, another run of it
			changedBy = append(changedBy, "--"+g.name+"="+g.value)
		}
	}
	if len(changedBy) > 0 {
		what := "changed by " + strings.Join(changedBy, " ")
		if sc.Description == "" {
			sc.Description = what
		} else {
			sc.Description += " (" + what + ")"
		}
	}
	if err := sf.validate(sc, source); err != nil {
		return err
	}
	return sf.checkWork(sc)
}

// checkWork refuses a scenario whose estimated work exceeds --max-events,
// saying the estimate and the flag that allows it.
func (sf *scenarioFlags) checkWork(sc *spec.Scenario) error {
	if sf.maxEvents < 0 {
		return fmt.Errorf("--max-events: must be 0 (no bound) or more, got %d", sf.maxEvents)
	}
	if err := sc.CheckWork(sf.maxEvents); err != nil {
		return fmt.Errorf("%w; --max-events=0 (no bound), or a bound above the estimate, lets it run", err)
	}
	return nil
}

func (sf *scenarioFlags) validate(sc *spec.Scenario, source string) error {
	err := sc.Validate()
	if err == nil {
		return nil
	}
	var errs []error
	var all []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		all = j.Unwrap()
	} else {
		all = []error{err}
	}
	for _, e := range all {
		var fe *spec.FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, e)
			continue
		}
		if k := sf.knobFor(fe.Field); k != nil {
			errs = append(errs, fmt.Errorf("--%s: %s", k.name, fe.Problem))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s: %s", source, fe.Field, fe.Problem))
	}
	return errors.Join(errs...)
}

// knobFor is the last knob given that set field or a field around it.
func (sf *scenarioFlags) knobFor(field string) *knob {
	for i := len(sf.changes) - 1; i >= 0; i-- {
		k := sf.changes[i].knob
		if k.field == field || strings.HasPrefix(field, k.field+".") || strings.HasPrefix(field, k.field+"[") ||
			strings.HasPrefix(k.field, field+".") {
			return k
		}
	}
	return nil
}

// swarmRanges are the swarm's ranges with the knobs the flags set fixed:
// a swarm draws the others per seed and keeps these as given.
func (sf *scenarioFlags) swarmRanges() harness.SwarmRanges {
	ranges := harness.DefaultSwarmRanges
	ranges.Fixed = nil
	for _, c := range sf.changes {
		if k := c.knob.swarm; k != "" && !slices.Contains(ranges.Fixed, k) {
			ranges.Fixed = append(ranges.Fixed, k)
		}
	}
	return ranges
}

// swarmArgs renders the knob flags given that fix a knob a swarm would
// otherwise draw.
func (sf *scenarioFlags) swarmArgs() []string {
	var out []string
	for i, g := range sf.given {
		if sf.changes[i].knob.swarm != "" {
			out = append(out, "--"+g.name+"="+g.value)
		}
	}
	return out
}

// args renders the knob flags as given, for a command line that
// reproduces the run.
func (sf *scenarioFlags) args() []string {
	out := make([]string, 0, len(sf.given))
	for _, g := range sf.given {
		out = append(out, "--"+g.name+"="+g.value)
	}
	return out
}

// loadScenario resolves a scenario argument: a built-in name, or a
// scenario or fixture file. The empty argument is the default scenario.
// It returns the scenario, how to name its source in messages, and the
// fixture when the argument is a fixture file.
func loadScenario(arg string) (spec.Scenario, string, *scenario.Fixture, error) {
	if arg == "" {
		arg = spec.DefaultScenario
	}
	if sc, ok := spec.Builtin(arg); ok && !looksLikePath(arg) {
		return sc, arg, nil, nil
	}
	if !looksLikePath(arg) {
		if _, err := os.Stat(arg); err != nil {
			return spec.Scenario{}, arg, nil, fmt.Errorf("no built-in scenario or file is called %q (the built-ins are: %s; run lab scenarios)",
				arg, strings.Join(spec.BuiltinNames(), ", "))
		}
	}
	sc, fx, err := scenario.Open(arg)
	return sc, arg, fx, err
}

func looksLikePath(s string) bool {
	ext := filepath.Ext(s)
	return strings.ContainsRune(s, filepath.Separator) || strings.ContainsRune(s, '/') || ext == ".yaml" || ext == ".yml"
}
