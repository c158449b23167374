package scenario

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// Fixture is a scenario, the seeds to run it with, and what the report of
// every seed must show. It is what a fixture file describes:
//
//	name: gap
//	description: the design note's check-to-write gap
//	scenario:
//	  builtin: gap          # or a whole scenario, as in a scenario file
//	seeds: [1]              # or 7, or {from: 1, count: 200}
//	modes: both             # fenced, naive or both (the default)
//	expect:
//	  naive:  {stale_writes_landed: ">= 1", silent_overlaps: ">= 1"}
//	  fenced: {stale_writes_landed: 0, commits_refused: 1}
type Fixture struct {
	File        string
	Name        string
	Description string
	// Scenario is the fixture's scenario, with Seed set to the first seed.
	Scenario spec.Scenario
	Seeds    []uint64 // at least one; the scenario's own seed if the file names none
	Modes    []harness.Mode
	// Backend is where the fixture runs: BackendSim (the deterministic
	// simulator, the default) or a real-time backend ("memory", "etcd"),
	// which RunOptions.Runner runs. On a real backend, time is not
	// deterministic, so expectations must be invariants (a count of 0),
	// at-least counts (">= N", "> N") or comparisons of counters.
	Backend string
	// Expect holds the fixture's assertions, in file order, plus the one
	// every fixture that runs the fenced mode makes implicitly unless it
	// says otherwise: fenced.violations == 0.
	Expect []Expectation
}

// Expectation is one assertion of a fixture, checked against every seed's
// result.
type Expectation struct {
	Field string // where the file says it: "expect.fenced.commits_refused"
	Line  int    // its line in the file; 0 for the implicit one
	Want  string // what it wants, as the file says it: ">= 1"
	// Events lists the event kinds the check reads (timelines); the
	// fixture runner records only those.
	Events []history.Kind
	check  func(res *harness.Result, events []history.Event) (ok bool, got string)
	// realSafe: the expectation can hold on any run of a real backend,
	// whose timing is not the seed's to decide.
	realSafe bool
}

// The backends a fixture can name.
const (
	BackendSim = "sim"
)

// backends lists what a fixture's backend key accepts.
var backends = []string{BackendSim, "memory", "etcd"}

// ErrNotRealSafe is wrapped by SetBackend's refusal of a fixture whose
// expectations only the simulator can meet.
var ErrNotRealSafe = errors.New("expectation needs the deterministic simulator")

// SetBackend moves the fixture to backend b (see Fixture.Backend). It
// refuses a real-time backend when an expectation needs the simulator's
// determinism (an exact count, a timeline), naming the first one.
func (fx *Fixture) SetBackend(b string) error {
	if !slices.Contains(backends, b) {
		return fmt.Errorf("backend must be %s, got %q", strings.Join(backends, ", "), b)
	}
	if b != BackendSim {
		for _, x := range fx.Expect {
			if !x.realSafe {
				return fmt.Errorf("%w: %s:%d: %s wants %s", ErrNotRealSafe, fx.File, x.Line, x.Field, x.Want)
			}
		}
	}
	fx.Backend = b
	return nil
}

// Check reports whether res (and the events recorded for the
// expectation's mode, see Events) satisfy the expectation, and what was
// found.
func (e Expectation) Check(res *harness.Result, events []history.Event) (ok bool, got string) {
	return e.check(res, events)
}

// The top-level keys of a fixture file.
const (
	fixtureKeyScenario = "scenario"
	fixtureKeySeeds    = "seeds"
)

var fixtureKeys = []string{"name", "description", "backend", fixtureKeyScenario, fixtureKeySeeds, "modes", "expect"}

// MaxFixtureSeeds bounds `seeds: {from, count}`: a fixture is a test, and
// a test that runs longer than this is a swarm.
const MaxFixtureSeeds = 100_000

// LoadFixture reads a fixture file. Every problem is a *FileError naming
// the file, the line and the field; the errors are joined, one per
// problem.
func LoadFixture(path string) (*Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseFixture(path, data)
}

// ParseFixture reads a fixture file's bytes; file names it in errors.
func ParseFixture(file string, data []byte) (*Fixture, error) {
	d := newDecoder(file)
	root, ok := d.parseRoot(data)
	if !ok {
		return nil, d.err()
	}
	return parseFixture(d, root)
}

func parseFixture(d *decoder, root *ast.MappingNode) (*Fixture, error) {
	fx := &Fixture{File: d.file, Modes: harness.Modes}
	es, _ := d.entries(root, "")
	byKey := make(map[string]entry, len(es))
	for _, e := range es {
		if !slices.Contains(fixtureKeys, e.key) {
			d.fail(e.line, e.key, "unknown key (the keys of a fixture are: %s)", strings.Join(fixtureKeys, ", "))
			continue
		}
		d.lines[e.key] = e.line
		byKey[e.key] = e
	}
	if e, ok := byKey["name"]; ok {
		fx.Name, _ = d.str(d.plain(e.value, "name"), "name")
	}
	if fx.Name == "" {
		fx.Name = baseName(d.file)
	}
	if e, ok := byKey["description"]; ok {
		fx.Description, _ = d.str(d.plain(e.value, "description"), "description")
	}
	fx.Backend = BackendSim
	if e, ok := byKey["backend"]; ok {
		if b, ok := d.str(d.plain(e.value, "backend"), "backend"); ok {
			if slices.Contains(backends, b) {
				fx.Backend = b
			} else {
				d.fail(e.line, "backend", "must be %s, got %q", strings.Join(backends, ", "), b)
			}
		}
	}
	e, ok := byKey[fixtureKeyScenario]
	if ok {
		d.decodeScenario(e.value, fixtureKeyScenario, &fx.Scenario)
	} else {
		// Reported, and the rest of the file still read: every problem
		// in one pass. Validate has nothing to judge.
		d.fail(d.lines[""], fixtureKeyScenario, "is required (a scenario: `builtin: NAME`, or the scenario's keys)")
		d.failed[""] = true
	}
	// Run on its own (lab run FILE), the fixture's scenario is reported
	// under the fixture's name and description, unless its scenario
	// mapping names and describes itself.
	if _, named := d.lines[join(fixtureKeyScenario, "name")]; !named {
		fx.Scenario.Name = fx.Name
	}
	if _, described := d.lines[join(fixtureKeyScenario, "description")]; !described && fx.Description != "" {
		fx.Scenario.Description = fx.Description
	}
	fx.Seeds = []uint64{fx.Scenario.Seed}
	if e, ok := byKey[fixtureKeySeeds]; ok {
		if seeds, ok := d.seeds(e.value, fixtureKeySeeds); ok {
			fx.Seeds = seeds
		}
	}
	fx.Scenario.Seed = fx.Seeds[0]
	if e, ok := byKey["modes"]; ok {
		if s, ok := d.str(d.plain(e.value, "modes"), "modes"); ok {
			modes, err := harness.ParseModes(s)
			if err != nil || s == "" {
				d.fail(e.line, "modes", "must be fenced, naive or both, got %q", s)
			} else {
				fx.Modes = modes
			}
		}
	}
	if e, ok := byKey["expect"]; ok {
		d.expectations(e.value, fx)
		if fx.Backend != BackendSim {
			for _, x := range fx.Expect {
				if !x.realSafe {
					d.fail(x.Line, x.Field, "backend %s runs in real time, which no seed makes repeatable: expect invariants (0), "+
						"at-least counts (\">= N\") or comparisons of counters, not %s", fx.Backend, x.Want)
				}
			}
		}
	} else {
		d.fail(d.lines[""], "expect", "is required: a fixture asserts something about its reports")
	}
	if !d.failed[""] {
		d.validate(&fx.Scenario, fixtureKeyScenario)
	}
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return fx, nil
}

// seeds reads `7`, `[1, 2, 3]` or `{from: 1, count: 200}`.
func (d *decoder) seeds(n ast.Node, path string) ([]uint64, bool) {
	n = d.plain(n, path)
	switch n := n.(type) {
	case nil:
		return nil, false
	case *ast.IntegerNode:
		s, ok := d.unsigned(n, path)
		return []uint64{s}, ok
	case *ast.SequenceNode:
		if len(n.Values) == 0 {
			d.fail(lineOf(n), path, "is empty: list at least one seed")
			return nil, false
		}
		out := make([]uint64, 0, len(n.Values))
		good := true
		for i, v := range n.Values {
			s, ok := d.unsigned(d.plain(v, index(path, i)), index(path, i))
			good = good && ok
			out = append(out, s)
		}
		return out, good
	case *ast.MappingNode:
		var span struct {
			From  uint64 `json:"from"`
			Count int    `json:"count"`
		}
		span.Count = -1
		before := len(d.errs)
		d.decodeStruct(n, path, reflect.ValueOf(&span).Elem())
		if len(d.errs) > before {
			return nil, false
		}
		if span.Count == -1 {
			d.fail(lineOf(n), join(path, "count"), "is required: {from: 1, count: 200}")
			return nil, false
		}
		if span.Count < 1 || span.Count > MaxFixtureSeeds {
			d.fail(d.lineFor(join(path, "count")), join(path, "count"), "must be in [1, %d], got %d", MaxFixtureSeeds, span.Count)
			return nil, false
		}
		if span.From > ^uint64(0)-uint64(span.Count-1) {
			d.fail(d.lineFor(join(path, "from")), join(path, "from"), "%d + %d seeds overflows", span.From, span.Count)
			return nil, false
		}
		out := make([]uint64, span.Count)
		for i := range out {
			out[i] = span.From + uint64(i)
		}
		return out, true
	}
	d.fail(lineOf(n), path, "must be a seed, a list of seeds or {from: N, count: N}, got %s", describe(n))
	return nil, false
}

// counterNames are the report's integer counters by their JSON names,
// plus the lengths of its lists.
var counterNames = func() []string {
	var names []string
	t := reflect.TypeFor[harness.Report]()
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() == reflect.Int {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			names = append(names, name)
		}
	}
	return append(names, keyViolations, keyCounterexamples)
}()

const (
	keyViolations      = "violations"
	keyCounterexamples = "counterexamples"
	keyTimeline        = "timeline"
	keyDriftBudget     = "drift_within_budget"
)

// counter reads a named counter of a report; name is one of counterNames.
func counter(rep *harness.Report, name string) int {
	switch name {
	case keyViolations:
		return len(rep.Violations)
	case keyCounterexamples:
		return len(rep.Counterexamples)
	}
	v := reflect.ValueOf(rep).Elem()
	return int(v.Field(jsonFields(v.Type())[name]).Int())
}

func (d *decoder) expectations(n ast.Node, fx *Fixture) {
	es, ok := d.entries(n, "expect")
	if !ok && es == nil {
		return
	}
	if len(es) == 0 {
		d.fail(lineOf(n), "expect", "is empty: a fixture asserts something about its reports")
	}
	explicitViolations := false
	for _, e := range es {
		p := join("expect", e.key)
		d.lines[p] = e.line
		switch e.key {
		case keyDriftBudget:
			v := d.plain(e.value, p)
			if v == nil {
				continue
			}
			b, ok := v.(*ast.BoolNode)
			if !ok {
				d.fail(lineOf(v), p, "must be true or false, got %s", describe(v))
				continue
			}
			want := b.Value
			fx.Expect = append(fx.Expect, Expectation{Field: p, Line: e.line, Want: strconv.FormatBool(want), realSafe: true,
				check: func(res *harness.Result, _ []history.Event) (bool, string) {
					return res.DriftWithinBudget == want, strconv.FormatBool(res.DriftWithinBudget)
				}})
		case string(harness.Fenced), string(harness.Naive):
			m := harness.Mode(e.key)
			if !slices.Contains(fx.Modes, m) {
				d.fail(e.line, p, "the fixture does not run the %s mode (modes: %s)", m, modesString(fx.Modes))
				continue
			}
			if d.modeExpectations(e.value, p, m, fx) && m == harness.Fenced {
				explicitViolations = true
			}
		default:
			d.fail(e.line, p, "unknown key (the keys of expect are: fenced, naive, %s)", keyDriftBudget)
		}
	}
	if slices.Contains(fx.Modes, harness.Fenced) && !explicitViolations {
		// A fixture never passes while the library breaks its promises,
		// unless it says it expects exactly that.
		fx.Expect = append(fx.Expect, counterExpectation("expect.fenced.violations (implicit)", 0, harness.Fenced,
			keyViolations, comparison{op: "==", n: 0}))
	}
}

func modesString(modes []harness.Mode) string {
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// modeExpectations reads one mode's assertions and reports whether they
// include one on violations.
func (d *decoder) modeExpectations(n ast.Node, path string, m harness.Mode, fx *Fixture) (violations bool) {
	es, _ := d.entries(n, path)
	for _, e := range es {
		p := join(path, e.key)
		d.lines[p] = e.line
		v := d.plain(e.value, p)
		if v == nil {
			continue
		}
		switch {
		case e.key == keyTimeline:
			d.timeline(v, p, e.line, m, fx)
		case e.key == keyCounterexamples && v.Type() == ast.SequenceType:
			d.counterexamples(v.(*ast.SequenceNode), p, m, fx)
		case slices.Contains(counterNames, e.key):
			c, ok := d.comparison(v, p)
			if ok {
				violations = violations || e.key == keyViolations
				fx.Expect = append(fx.Expect, counterExpectation(p, e.line, m, e.key, c))
			}
		default:
			d.fail(e.line, p, "unknown counter (the counters are: %s; and %s)", strings.Join(counterNames, ", "), keyTimeline)
		}
	}
	return violations
}

// comparison is "OP N" or "OP counter", a bare number meaning "== N".
type comparison struct {
	op      string
	n       int
	counter string // compare with this counter of the same report instead of n
}

var comparisonRE = regexp.MustCompile(`^\s*(>=|<=|==|!=|>|<)\s*([A-Za-z_][A-Za-z0-9_]*|-?[0-9]+)\s*$`)

func (d *decoder) comparison(n ast.Node, path string) (comparison, bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		x, ok := d.integer(n, path)
		if !ok || x < math32Min || x > math32Max {
			if ok {
				d.fail(lineOf(n), path, "%d is out of range", x)
			}
			return comparison{}, false
		}
		return comparison{op: "==", n: int(x)}, true
	case *ast.StringNode:
		m := comparisonRE.FindStringSubmatch(n.Value)
		if m == nil {
			d.fail(lineOf(n), path, "must be a number or a comparison such as \">= 1\" or \"<= overlaps\", got %q", n.Value)
			return comparison{}, false
		}
		c := comparison{op: m[1]}
		if x, err := strconv.Atoi(m[2]); err == nil {
			if x < math32Min || x > math32Max {
				d.fail(lineOf(n), path, "%d is out of range", x)
				return comparison{}, false
			}
			c.n = x
		} else if slices.Contains(counterNames, m[2]) {
			c.counter = m[2]
		} else {
			d.fail(lineOf(n), path, "compares with %q, which is no counter (the counters are: %s)", m[2], strings.Join(counterNames, ", "))
			return comparison{}, false
		}
		return c, true
	}
	d.fail(lineOf(n), path, "must be a number or a comparison such as \">= 1\", got %s", describe(n))
	return comparison{}, false
}

// Counts in a comparison stay well inside int on every platform.
const (
	math32Min = -1 << 31
	math32Max = 1<<31 - 1
)

func (c comparison) String() string {
	rhs := c.counter
	if rhs == "" {
		rhs = strconv.Itoa(c.n)
	}
	if c.op == "==" && c.counter == "" {
		return rhs
	}
	return c.op + " " + rhs
}

func (c comparison) holds(x, y int) bool {
	switch c.op {
	case ">=":
		return x >= y
	case "<=":
		return x <= y
	case ">":
		return x > y
	case "<":
		return x < y
	case "!=":
		return x != y
	}
	return x == y
}

func counterExpectation(field string, line int, m harness.Mode, name string, c comparison) Expectation {
	realSafe := c.counter != "" || c.op == ">=" || c.op == ">" || (c.op == "==" && c.n == 0)
	return Expectation{Field: field, Line: line, Want: c.String(), realSafe: realSafe,
		check: func(res *harness.Result, _ []history.Event) (bool, string) {
			rep, ok := res.Modes[m]
			if !ok {
				return false, "no " + string(m) + " report"
			}
			x, y := counter(rep, name), c.n
			got := strconv.Itoa(x)
			if c.counter != "" {
				y = counter(rep, c.counter)
				got += fmt.Sprintf(" (%s is %d)", c.counter, y)
			}
			if name == keyViolations && x > 0 {
				got += ": " + strings.Join(rep.Violations, "; ")
			}
			return c.holds(x, y), got
		}}
}

// cxPattern is a counterexample a fixture expects: every field it gives
// must match.
type cxPattern struct {
	Kind       *history.CounterexampleKind `json:"kind"`
	AtMS       *float64                    `json:"at_ms"`
	Resource   *string                     `json:"resource"`
	Holder     *string                     `json:"holder"`
	Fence      *leasefence.Fence           `json:"fence"`
	Other      *string                     `json:"other"`
	OtherFence *leasefence.Fence           `json:"other_fence"`
}

func (p cxPattern) matches(c history.Counterexample) bool {
	return eq(p.Kind, c.Kind) && eq(p.AtMS, c.AtMS) && eq(p.Resource, c.Resource) && eq(p.Holder, c.Holder) &&
		eq(p.Fence, c.Fence) && eq(p.Other, c.Other) && eq(p.OtherFence, c.OtherFence)
}

func eq[T comparable](want *T, got T) bool { return want == nil || *want == got }

var cxKinds = []history.CounterexampleKind{history.StaleWrite, history.SilentOverlap, history.RefusedWrite,
	history.ContainmentBreach, history.FenceReuse, history.UnexplainedRefusal}

// counterexamples reads a list of counterexamples that the report must
// contain (among the first history.MaxCounterexamples of each kind).
func (d *decoder) counterexamples(seq *ast.SequenceNode, path string, m harness.Mode, fx *Fixture) {
	for i, item := range seq.Values {
		p := index(path, i)
		d.lines[p] = lineOf(item)
		var pat cxPattern
		d.decodeStruct(item, p, reflect.ValueOf(&pat).Elem())
		if pat.Kind != nil && !slices.Contains(cxKinds, *pat.Kind) {
			d.fail(d.lineFor(join(p, "kind")), join(p, "kind"), "no counterexample is of kind %q (the kinds are: %s)", *pat.Kind, joinKinds(cxKinds))
			continue
		}
		want := flow(reflect.ValueOf(pat))
		fx.Expect = append(fx.Expect, Expectation{Field: p, Line: lineOf(item), Want: "a counterexample " + want,
			check: func(res *harness.Result, _ []history.Event) (bool, string) {
				rep, ok := res.Modes[m]
				if !ok {
					return false, "no " + string(m) + " report"
				}
				var seen []string
				for _, c := range rep.Counterexamples {
					if pat.matches(c) {
						return true, describeCounterexample(c)
					}
					seen = append(seen, describeCounterexample(c))
				}
				if len(seen) == 0 {
					return false, "no counterexamples"
				}
				return false, "none matches; the report has: " + strings.Join(seen, "; ")
			}})
	}
}

func joinKinds[T ~string](ks []T) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

func describeCounterexample(c history.Counterexample) string {
	s := fmt.Sprintf("%s at %vms %s %s@%d", c.Kind, c.AtMS, c.Resource, c.Holder, c.Fence)
	if c.Other != "" {
		s += fmt.Sprintf(" vs %s@%d", c.Other, c.OtherFence)
	}
	return s
}

// eventPattern is an event a fixture expects at an exact instant: the
// design note's timelines, to the millisecond.
type eventPattern struct {
	At         *time.Duration    `json:"at"`
	Kind       *string           `json:"kind"`
	Agent      *string           `json:"agent"`
	Resource   *string           `json:"resource"`
	Fence      *leasefence.Fence `json:"fence"`
	Other      *string           `json:"other"`
	OtherFence *leasefence.Fence `json:"other_fence"`
	Reason     *string           `json:"reason"`
	Outcome    *string           `json:"outcome"`
	Dur        *time.Duration    `json:"dur"`
	Deadline   *time.Duration    `json:"deadline"`
}

func (p eventPattern) matches(e history.Event) bool {
	return eq(p.At, e.At) && eq(p.Kind, e.Kind.String()) && eq(p.Agent, name(e.Agent, spec.AgentName)) &&
		eq(p.Resource, name(e.Resource, spec.ResourceName)) && eq(p.Fence, e.Fence) &&
		eq(p.Other, name(e.Other, spec.AgentName)) && eq(p.OtherFence, e.OtherFence) &&
		eq(p.Reason, string(e.Reason)) && eq(p.Outcome, string(e.Outcome)) && eq(p.Dur, e.Dur) && eq(p.Deadline, e.Deadline)
}

func name(i int, f func(int) string) string {
	if i < 0 {
		return ""
	}
	return f(i)
}

// eventKinds maps each event kind's name to the kind.
var eventKinds = func() map[string]history.Kind {
	m := make(map[string]history.Kind)
	for k := history.Kind(1); k.String() != "unknown"; k++ {
		m[k.String()] = k
	}
	return m
}()

// timeline reads a list of events that must happen, each with its
// instant and kind.
func (d *decoder) timeline(n ast.Node, path string, line int, m harness.Mode, fx *Fixture) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok || len(seq.Values) == 0 {
		d.fail(line, path, "must be a list of events, e.g. - {at: 1400ms, kind: commit_refused, agent: agent-1}")
		return
	}
	for i, item := range seq.Values {
		p := index(path, i)
		d.lines[p] = lineOf(item)
		var pat eventPattern
		before := len(d.errs)
		d.decodeStruct(item, p, reflect.ValueOf(&pat).Elem())
		if len(d.errs) > before {
			continue
		}
		if pat.At == nil || pat.Kind == nil {
			d.fail(lineOf(item), p, "an expected event needs at least `at` and `kind`")
			continue
		}
		kind, ok := eventKinds[*pat.Kind]
		if !ok {
			d.fail(d.lineFor(join(p, "kind")), join(p, "kind"), "no event is of kind %q (the kinds are: %s)", *pat.Kind, strings.Join(sortedKeys(eventKinds), ", "))
			continue
		}
		want := flow(reflect.ValueOf(pat))
		fx.Expect = append(fx.Expect, Expectation{Field: p, Line: lineOf(item), Want: "an event " + want,
			Events: []history.Kind{kind},
			check: func(_ *harness.Result, events []history.Event) (bool, string) {
				var near []string
				for _, e := range events {
					if e.Mode != m || e.Kind != kind {
						continue
					}
					if pat.matches(e) {
						return true, describeEvent(e)
					}
					if len(near) < 5 {
						near = append(near, describeEvent(e))
					}
				}
				if len(near) == 0 {
					return false, "no " + kind.String() + " event"
				}
				return false, "none matches; the " + kind.String() + " events are: " + strings.Join(near, "; ")
			}})
	}
}

// describeEvent writes an event the way a timeline expectation spells it.
func describeEvent(e history.Event) string {
	s := fmt.Sprintf("{at: %v, kind: %s", e.At, e.Kind)
	if e.Agent >= 0 {
		s += ", agent: " + spec.AgentName(e.Agent)
	}
	if e.Resource >= 0 {
		s += ", resource: " + spec.ResourceName(e.Resource)
	}
	if e.Fence != 0 {
		s += fmt.Sprintf(", fence: %d", e.Fence)
	}
	if e.Other >= 0 {
		s += fmt.Sprintf(", other: %s, other_fence: %d", spec.AgentName(e.Other), e.OtherFence)
	}
	if e.Reason != "" {
		s += fmt.Sprintf(", reason: %s", e.Reason)
	}
	if e.Outcome != "" {
		s += fmt.Sprintf(", outcome: %s", e.Outcome)
	}
	if e.Dur != 0 {
		s += fmt.Sprintf(", dur: %v", e.Dur)
	}
	if e.Deadline != 0 {
		s += fmt.Sprintf(", deadline: %v", e.Deadline)
	}
	return s + "}"
}
