package scenario

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
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
	// Resource is where a real-time fixture's gates live ("memory",
	// "sqlite", "etcd", "http"; "" for the backend's own). A fixture that
	// names a resource and no backend runs on "memory".
	Resource     string
	resourceLine int
	// Agents is how a real backend runs the agents: AgentsInProcess
	// (goroutines, the default) or AgentsProcess (each an OS process of
	// its own; on etcd only).
	Agents string
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
var backends = []string{BackendSim, "memory", "etcd", "redis"}

// resources lists what a fixture's resource key accepts: lab's --resource.
var resources = []string{"memory", "sqlite", "etcd", "http", "redis"}

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
	if b == BackendSim && fx.Resource != "" {
		return fmt.Errorf("%s:%d: resource %s needs a real-time backend", fx.File, fx.resourceLine, fx.Resource)
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

var fixtureKeys = []string{"name", "description", "backend", "resource", "agents", fixtureKeyScenario, fixtureKeySeeds, "modes", "expect"}

// How a fixture's agents run on a real backend (Fixture.Agents).
const (
	AgentsInProcess = "in-process"
	AgentsProcess   = "process"
)

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
	d.resource(byKey, fx)
	fx.Agents = AgentsInProcess
	if e, ok := byKey["agents"]; ok {
		if a, ok := d.str(d.plain(e.value, "agents"), "agents"); ok {
			switch {
			case a != AgentsInProcess && a != AgentsProcess:
				d.fail(e.line, "agents", "must be %s or %s, got %q", AgentsInProcess, AgentsProcess, a)
			case a == AgentsProcess && fx.Backend != "etcd":
				d.fail(e.line, "agents", "agents as processes need backend etcd, got %q", fx.Backend)
			default:
				fx.Agents = a
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
		if fx.Scenario.OverTheWire() && fx.Resource != "http" {
			field := join(fixtureKeyScenario, "forgers")
			if len(fx.Scenario.Forgers) == 0 {
				field = join(join(fixtureKeyScenario, "network"), "write_delay")
			}
			d.fail(d.lineFor(field), field, "only a resource across a network plays it: add `resource: http`")
		}
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
	case !slices.Contains(resources, r):
		d.fail(e.line, "resource", "must be %s, got %q", strings.Join(resources, ", "), r)
	case fx.Backend == BackendSim && d.lines["backend"] != 0:
		d.fail(e.line, "resource", "%s needs a real-time backend, and backend is %s", r, fx.Backend)
	default:
		fx.Resource = r
		if fx.Backend == BackendSim {
			fx.Backend = "memory"
		}
	}
}
