package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// The expectations of a fixture: counters with a comparison, counterexample
// patterns, and events of the timeline.

// counterNames are the report's integer counters by their JSON names,
// plus the lengths of its lists.
var counterNames = func() []string {
	var names []string
	t := reflect.TypeFor[history.Report]()
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
	keyVacuous         = "vacuous"
)

// counter reads a named counter of a report; name is one of counterNames.
func counter(rep *history.Report, name string) int {
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
	explicit := map[history.Mode]bool{}        // fenced contenders whose violations the file expects
	explicitVacuous := map[history.Mode]bool{} // and those whose vacuity it expects
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
				check: func(res *history.Result, _ []history.Event) (bool, string) {
					return res.DriftWithinBudget == want, strconv.FormatBool(res.DriftWithinBudget)
				}})
		default:
			c, ok := registry.Lookup(registry.Contenders, e.key)
			if !ok {
				d.fail(e.line, p, "unknown key (the keys of expect are: %s, %s)", strings.Join(registry.Names(registry.Contenders), ", "), keyDriftBudget)
				continue
			}
			m := history.Mode(e.key)
			if !slices.Contains(fx.Modes, m) {
				d.fail(e.line, p, "the fixture does not run the %s mode (modes: %s)", m, modesString(fx.Modes))
				continue
			}
			violations, vacuous := d.modeExpectations(e.value, p, m, fx)
			if c.Discipline == history.DisciplineFenced {
				explicit[m] = explicit[m] || violations
				explicitVacuous[m] = explicitVacuous[m] || vacuous
			}
		}
	}
	for _, m := range fx.Modes {
		if c, ok := registry.Lookup(registry.Contenders, string(m)); ok && c.Discipline == history.DisciplineFenced && !explicit[m] {
			// A fixture never passes while a fenced contender breaks its
			// promises, unless it says it expects exactly that.
			fx.Expect = append(fx.Expect, counterExpectation("expect."+string(m)+".violations (implicit)", 0, m,
				keyViolations, comparison{op: "==", n: 0}))
		}
		if c, ok := registry.Lookup(registry.Contenders, string(m)); ok && c.Discipline == history.DisciplineFenced && !explicitVacuous[m] {
			// Nor while it made no write: nothing was tested.
			fx.Expect = append(fx.Expect, vacuousExpectation("expect."+string(m)+".vacuous (implicit)", 0, m, false))
		}
	}
}

func modesString(modes []history.Mode) string {
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// modeExpectations reads one mode's assertions and reports whether they
// include one on violations.
func (d *decoder) modeExpectations(n ast.Node, path string, m history.Mode, fx *Fixture) (violations, vacuous bool) {
	es, _ := d.entries(n, path)
	for _, e := range es {
		p := join(path, e.key)
		d.lines[p] = e.line
		v := d.plain(e.value, p)
		if v == nil {
			continue
		}
		switch {
		case e.key == keyVacuous:
			b, ok := v.(*ast.BoolNode)
			if !ok {
				d.fail(lineOf(v), p, "must be true or false, got %s", describe(v))
				continue
			}
			vacuous = true
			fx.Expect = append(fx.Expect, vacuousExpectation(p, e.line, m, b.Value))
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
			d.fail(e.line, p, "unknown counter (the counters are: %s; and %s, %s)", strings.Join(counterNames, ", "), keyTimeline, keyVacuous)
		}
	}
	return violations, vacuous
}

// vacuousExpectation asserts whether mode m made no write at all.
func vacuousExpectation(field string, line int, m history.Mode, want bool) Expectation {
	return Expectation{Field: field, Line: line, Want: strconv.FormatBool(want), realSafe: true,
		check: func(res *history.Result, _ []history.Event) (bool, string) {
			rep, ok := res.Modes[m]
			if !ok {
				return false, "no " + string(m) + " report"
			}
			return rep.Vacuous == want, strconv.FormatBool(rep.Vacuous)
		}}
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

func counterExpectation(field string, line int, m history.Mode, name string, c comparison) Expectation {
	realSafe := c.counter != "" || c.op == ">=" || c.op == ">" || (c.op == "==" && c.n == 0)
	return Expectation{Field: field, Line: line, Want: c.String(), realSafe: realSafe,
		check: func(res *history.Result, _ []history.Event) (bool, string) {
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
func (d *decoder) counterexamples(seq *ast.SequenceNode, path string, m history.Mode, fx *Fixture) {
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
			check: func(res *history.Result, _ []history.Event) (bool, string) {
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

// eventPattern is an event a fixture expects at an exact instant: a
// scripted timeline such as the gap's, to the millisecond.
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
	Fault      *string           `json:"fault"`
	Target     *string           `json:"target"`
}

func (p eventPattern) matches(e history.Event) bool {
	return eq(p.At, e.At) && eq(p.Kind, e.Kind.String()) && eq(p.Agent, name(e.Agent, spec.AgentName)) &&
		eq(p.Resource, name(e.Resource, spec.ResourceName)) && eq(p.Fence, e.Fence) &&
		eq(p.Other, name(e.Other, spec.AgentName)) && eq(p.OtherFence, e.OtherFence) &&
		eq(p.Reason, string(e.Reason)) && eq(p.Outcome, string(e.Outcome)) && eq(p.Dur, e.Dur) && eq(p.Deadline, e.Deadline) &&
		eq(p.Fault, e.Fault) && eq(p.Target, e.Target)
}

// retiredKinds are event kinds of older labs, with what records the same
// now: a fixture that names one is told.
var retiredKinds = map[string]string{
	"partition_began": "a partition's beginning is {kind: fault_began, fault: partition, agent: ...}",
	"partition_ended": "a partition's end is {kind: fault_ended, fault: partition, agent: ...}",
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
func (d *decoder) timeline(n ast.Node, path string, line int, m history.Mode, fx *Fixture) {
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
		if now, retired := retiredKinds[*pat.Kind]; retired {
			d.fail(d.lineFor(join(p, "kind")), join(p, "kind"), "no event is of kind %q any more: %s", *pat.Kind, now)
			continue
		}
		if !ok {
			d.fail(d.lineFor(join(p, "kind")), join(p, "kind"), "no event is of kind %q (the kinds are: %s)", *pat.Kind, strings.Join(sortedKeys(eventKinds), ", "))
			continue
		}
		want := flow(reflect.ValueOf(pat))
		fx.Expect = append(fx.Expect, Expectation{Field: p, Line: lineOf(item), Want: "an event " + want,
			Events: []history.Kind{kind},
			check: func(_ *history.Result, events []history.Event) (bool, string) {
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
	if e.Fault != "" {
		s += ", fault: " + e.Fault
	}
	if e.Target != "" {
		s += fmt.Sprintf(", target: %q", e.Target)
	}
	return s + "}"
}
