package scenario

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// Fixture is a scenario, the seeds to run it with, and what the report of
// every seed must show. It is what a fixture file describes:
//
//	name: gap
//	description: the check-to-write gap
//	scenario:
//	  builtin: gap          # or a whole scenario, as in a scenario file
//	seeds: [1]              # or 7, or {from: 1, count: 200}
//	modes: both             # fenced, naive or both (the default)
//	contenders: [redsync, fenced] # or the contenders by name (not with modes)
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
	Modes    []history.Mode
	// Backend is where the fixture runs: registry.Sim (the deterministic
	// simulator, the default) or a real-time backend ("memory", "etcd"),
	// which RunOptions.Runner runs. On a real backend, time is not
	// deterministic, so expectations must be invariants (a count of 0),
	// at-least counts (">= N", "> N") or comparisons of counters.
	Backend string
	// Resource is where a real-time fixture's gates live ("memory",
	// "sqlite", "etcd", "http"; "" for the backend's own). A fixture that
	// names a resource and no backend runs on "memory".
	Resource     string
	resourceLine int
	// Agents is how a real backend runs the agents: AgentsInProcess
	// (goroutines, the default) or AgentsProcess (each an OS process of
	// its own; on etcd only).
	Agents string
	// Settings are what the fixture asks of its backend beyond its
	// defaults, under a key named as the backend (redis: {topology:
	// sentinel}): the struct its adapter registers (registry.Settings),
	// by backend name.
	Settings map[string]any
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
	check  func(res *history.Result, events []history.Event) (ok bool, got string)
	// realSafe: the expectation can hold on any run of a real backend,
	// whose timing is not the seed's to decide.
	realSafe bool
}

// ErrNotRealSafe is wrapped by SetBackend's refusal of a fixture whose
// expectations only the simulator can meet.
var ErrNotRealSafe = errors.New("expectation needs the deterministic simulator")

// SetBackend moves the fixture to backend b (see Fixture.Backend). It
// refuses a real-time backend when an expectation needs the simulator's
// determinism (an exact count, a timeline), naming the first one.
func (fx *Fixture) SetBackend(b string) error {
	be, ok := registry.Lookup(registry.Backends, b)
	if !ok {
		return fmt.Errorf("backend %w", registry.Choice(registry.Backends, b))
	}
	if !be.Real && fx.Resource != "" {
		return fmt.Errorf("%s:%d: resource %s needs a real-time backend", fx.File, fx.resourceLine, fx.Resource)
	}
	if err := registry.CheckContenders(fx.Modes, b, fx.Scenario); err != nil {
		return fmt.Errorf("%s: %w", fx.File, err)
	}
	if be.Real {
		for _, x := range fx.Expect {
			if !x.realSafe {
				return fmt.Errorf("%w: %s:%d: %s wants %s", ErrNotRealSafe, fx.File, x.Line, x.Field, x.Want)
			}
		}
	}
	fx.Backend = b
	return nil
}

// ErrNoContender is wrapped by Only's refusal of a fixture that runs none
// of the contenders asked for.
var ErrNoContender = errors.New("the fixture runs none of the contenders asked for")

// Only keeps, of the fixture's contenders, those among modes (lab fixtures
// --contenders), and the expectations of those alone; a fixture that runs
// none of them is refused with ErrNoContender.
func (fx *Fixture) Only(modes []history.Mode) error {
	kept := slices.DeleteFunc(slices.Clone(fx.Modes), func(m history.Mode) bool { return !slices.Contains(modes, m) })
	if len(kept) == 0 {
		return fmt.Errorf("%w: it runs %s", ErrNoContender, modesString(fx.Modes))
	}
	fx.Modes = kept
	fx.Expect = slices.DeleteFunc(fx.Expect, func(x Expectation) bool {
		parts := strings.SplitN(x.Field, ".", 3)
		if len(parts) < 3 {
			return false // of the run, not of one contender (drift_within_budget)
		}
		_, isContender := registry.Lookup(registry.Contenders, parts[1])
		return isContender && !slices.Contains(kept, history.Mode(parts[1]))
	})
	return nil
}

// Check reports whether res (and the events recorded for the
// expectation's mode, see Events) satisfy the expectation, and what was
// found.
func (e Expectation) Check(res *history.Result, events []history.Event) (ok bool, got string) {
	return e.check(res, events)
}

// The top-level keys of a fixture file.
const (
	fixtureKeyScenario = "scenario"
	fixtureKeySeeds    = "seeds"
)

var fixtureKeys = []string{"name", "description", "backend", "resource", "agents", fixtureKeyScenario, fixtureKeySeeds, "modes", "contenders", "expect"}

// keys are a fixture's keys: fixtureKeys and a key for each backend with
// settings of its own (registry.Settings).
func keys() []string {
	return slices.Concat(fixtureKeys[:5], registry.WithSettings(), fixtureKeys[5:]) // the settings after agents
}

// settings reads the key of each backend with settings of its own
// (registry.Settings) into a fresh struct of them, which the adapter
// then checks; the key needs that backend.
func (d *decoder) settings(byKey map[string]entry, fx *Fixture) {
	for _, name := range registry.WithSettings() {
		e, ok := byKey[name]
		if !ok {
			continue
		}
		st, _ := registry.Opener[registry.Settings](registry.Backends, name)
		n := d.plain(e.value, name)
		if _, ok := n.(*ast.MappingNode); !ok {
			d.fail(e.line, name, "must be a mapping such as %s, got %s", st.Example, describe(n))
			continue
		}
		v := st.New()
		d.decodeStruct(n, name, reflect.ValueOf(v).Elem())
		if fx.Backend != name {
			d.fail(e.line, name, "needs backend %s, and backend is %s", name, fx.Backend)
		}
		if se := registry.CheckSettings(name, v); se != nil {
			d.fail(d.lineFor(join(name, se.Key)), join(name, se.Key), "%s", se.Problem)
		}
		if fx.Settings == nil {
			fx.Settings = make(map[string]any)
		}
		fx.Settings[name] = v
	}
}

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
	fx := &Fixture{File: d.file, Modes: registry.Modes()}
	es, _ := d.entries(root, "")
	byKey := make(map[string]entry, len(es))
	for _, e := range es {
		if !slices.Contains(keys(), e.key) {
			d.fail(e.line, e.key, "unknown key (the keys of a fixture are: %s)", strings.Join(keys(), ", "))
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
	fx.Backend = registry.Default(registry.Backends).Name
	if e, ok := byKey["backend"]; ok {
		if b, ok := d.str(d.plain(e.value, "backend"), "backend"); ok {
			if err := registry.Choice(registry.Backends, b); err != nil {
				d.fail(e.line, "backend", "%v", err)
			} else {
				fx.Backend = b
			}
		}
	}
	d.resource(byKey, fx)
	d.agents(byKey, fx)
	d.settings(byKey, fx)
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
			modes, err := registry.ParseModes(s)
			if err != nil || s == "" {
				d.fail(e.line, "modes", "must be fenced, naive or both, got %q", s)
			} else {
				fx.Modes = modes
			}
		}
	}
	if e, ok := byKey["contenders"]; ok {
		d.contenders(e, byKey, fx)
	}
	if e, ok := byKey["expect"]; ok {
		d.expectations(e.value, fx)
		if fx.RealTime() {
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
		d.playable(fx)
	}
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return fx, nil
}

// contenders reads the fixture's contenders key: a list of contenders'
// names (registry.ParseContenders), which the modes key must not also
// choose.
func (d *decoder) contenders(e entry, byKey map[string]entry, fx *Fixture) {
	if _, both := byKey["modes"]; both {
		d.fail(e.line, "contenders", "and modes both choose what runs: give one (modes: fenced is contenders: [fenced])")
		return
	}
	seq, ok := d.plain(e.value, "contenders").(*ast.SequenceNode)
	if !ok {
		d.fail(e.line, "contenders", "must be a list of contenders' names, e.g. [redsync, fenced] (lab contenders lists them)")
		return
	}
	names := make([]string, 0, len(seq.Values))
	for i, v := range seq.Values {
		name, ok := d.str(d.plain(v, index("contenders", i)), index("contenders", i))
		if !ok {
			return
		}
		names = append(names, name)
	}
	modes, err := registry.ParseContenders(names)
	if err != nil {
		d.fail(e.line, "contenders", "%v", err)
		return
	}
	fx.Modes = modes
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

// resource reads the fixture's resource key: a real-time resource, which
// moves a fixture that names no backend to "memory".
func (d *decoder) resource(byKey map[string]entry, fx *Fixture) {
	e, ok := byKey["resource"]
	if !ok {
		return
	}
	fx.resourceLine = e.line
	r, ok := d.str(d.plain(e.value, "resource"), "resource")
	switch {
	case !ok:
	case registry.Choice(registry.Stores, r) != nil:
		d.fail(e.line, "resource", "%v", registry.Choice(registry.Stores, r))
	case !fx.RealTime() && d.lines["backend"] != 0:
		d.fail(e.line, "resource", "%s needs a real-time backend, and backend is %s", r, fx.Backend)
	default:
		fx.Resource = r
		if !fx.RealTime() {
			fx.Backend = registry.Memory // the in-memory coordinator
		}
	}
}

// agents reads the fixture's agents key: how a real backend runs them.
func (d *decoder) agents(byKey map[string]entry, fx *Fixture) {
	fx.Agents = registry.Default(registry.Drivers).Name
	e, ok := byKey["agents"]
	if !ok {
		return
	}
	a, ok := d.str(d.plain(e.value, "agents"), "agents")
	if !ok {
		return
	}
	if err := registry.Choice(registry.Drivers, a); err != nil {
		d.fail(e.line, "agents", "%v", err)
		return
	}
	if err := registry.Must(registry.Drivers, a).RunsOnBackend(fx.Backend); err != nil {
		d.fail(e.line, "agents", "%v", err)
		return
	}
	fx.Agents = a
}

// playable refuses the fixture's scenario where its backend, resource or
// agents cannot play it (registry.Entry.CanPlay), naming the scenario's
// key and the choice that would.
func (d *decoder) playable(fx *Fixture) {
	be, ok := registry.Lookup(registry.Backends, fx.Backend)
	if !ok {
		return // reported already
	}
	entries := []*registry.Entry{be}
	if be.Real {
		store, _ := registry.Lookup(registry.Stores, registry.StoreFor(fx.Backend, fx.Resource))
		driver, _ := registry.Lookup(registry.Drivers, fx.Agents)
		entries = append(entries, store, driver)
	}
	if err := registry.CheckContenders(fx.Modes, fx.Backend, fx.Scenario); err != nil {
		field := "contenders"
		if _, ok := d.lines[field]; !ok {
			field = "backend"
		}
		d.fail(d.lineFor(field), field, "%v", err)
	}
	var cp *registry.CannotPlayError
	if !errors.As(registry.CanPlayAll(fx.Scenario, entries...), &cp) {
		return
	}
	field := join(fixtureKeyScenario, cp.Feature.Field)
	if cp.Feature == registry.OverTheWire && len(fx.Scenario.Forgers) == 0 {
		field = join(fixtureKeyScenario, "network.write_delay")
	}
	problem := fmt.Sprintf("%s %s cannot play it", cp.Entry.Kind.Key, cp.Entry.Name)
	if len(cp.Alternatives) > 0 {
		problem += fmt.Sprintf(": add `%s: %s`", cp.Feature.Kind.Key, cp.Alternatives[0])
	}
	d.fail(d.lineFor(field), field, "%s", problem)
}

// RealTime reports whether the fixture runs in real time: on a backend
// other than the simulator.
func (fx *Fixture) RealTime() bool {
	b, ok := registry.Lookup(registry.Backends, fx.Backend)
	return ok && b.Real
}
