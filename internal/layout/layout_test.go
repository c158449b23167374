package layout_test

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const lab = "github.com/leasefence/lab/"

// arrows are the lab's packages, each with the packages of ours it may
// import directly. The library's core (leasefence) is the contract every
// package may name, report and liveview's readers excepted; the library's
// other modules are named where they are used.
var arrows = map[string][]string{
	"history":  {"leasefence"},
	"spec":     {"leasefence", "history"},
	"agent":    {"leasefence", "history", "spec"},
	"registry": {"spec", "history"},
	"liveview": {"leasefence", "history"},
	// The runners. The paced simulator and the real-time runner's live
	// run feed the one fold of events (liveview) and serve its snapshots.
	"harness": {"leasefence", "agent", "spec", "history", "registry", "liveview"},
	// The real-time runner names none of its adapters: each is a package
	// of its own below it, and registers itself with the registry.
	"realtime":                   {"leasefence", "agent", "spec", "history", "registry", "liveview"},
	"realtime/etcdcluster":       {"leasefence/etcdlease/etcdembed", "internal/scratch"},
	"realtime/etcdbackend":       {"leasefence", "realtime", "spec", "history", "registry", "realtime/etcdcluster", "leasefence/etcdlease", "leasefence/etcdlease/etcdembed", "internal/scratch"},
	"realtime/redisbackend":      {"leasefence", "realtime", "spec", "history", "registry", "leasefence/redislease", "leasefence/redislease/redisdeploy", "internal/scratch"},
	"realtime/sqlitestore":       {"leasefence", "realtime", "history", "registry", "leasefence/sqlgate", "internal/scratch"},
	"realtime/httpstore":         {"leasefence", "realtime", "spec", "history", "registry", "leasefence/fencehttp", "leasefence/fencetoken"},
	"realtime/etcdmutex":         {"realtime", "history", "registry", "leasefence/etcdlease/etcdembed", "realtime/internal/embedded"},
	"realtime/redislocks":        {"realtime", "history", "registry", "leasefence/redislease/redisdeploy", "internal/scratch"},
	"realtime/zklock":            {"realtime", "history", "registry", "internal/scratch"},
	"realtime/pgadvisory":        {"realtime", "history", "registry", "realtime/pgbackend"},
	"realtime/pgbackend":         {"realtime", "history", "registry", "spec", "leasefence", "leasefence/sqllease", "leasefence/sqlgate", "internal/scratch"},
	"realtime/k8slease":          {"realtime", "history", "registry", "leasefence/etcdlease/etcdembed", "realtime/internal/embedded"},
	"realtime/internal/embedded": {"realtime", "leasefence/etcdlease/etcdembed", "internal/scratch"},
	"realtime/internal/unlinked": {},                                                        // a test that links no adapter
	"realtime/internal/runtest":  {"leasefence", "realtime", "registry", "history", "spec"}, // the runner's and adapters' tests' helpers
	// The runner in a testing/synctest bubble, Redis-based locks on miniredis: a test package.
	// Its swarms draw each seed's fault mix as lab swarm does (harness).
	"realtime/virtualtest": {"realtime", "registry", "history", "spec", "harness", "realtime/redisbackend", "realtime/redislocks"},
	"realtime/adapters":    {"realtime/etcdbackend", "realtime/redisbackend", "realtime/sqlitestore", "realtime/httpstore", "realtime/etcdmutex", "realtime/redislocks", "realtime/zklock", "realtime/pgadvisory", "realtime/pgbackend"},
	// The process driver names no adapter either: its children attach to
	// the run's backend, store and contenders by the attachers the
	// adapters register.
	"procdriver": {"leasefence", "agent", "realtime", "spec", "history", "registry"},
	// labtest runs a user's lock in real time, or in a bubble
	// (realtime/virtualtest), over seeds drawn as lab swarm draws them.
	"labtest": {"realtime", "history", "registry", "scenario", "spec", "harness", "realtime/virtualtest"},
	// A user's lock, the worked example of docs/contenders.md: its test
	// imports labtest.
	"examples/setnxlock": {},
	// Above the runners: files, what reads histories, the dashboard.
	"scenario":           {"leasefence", "spec", "history", "registry"},
	"fixtures":           {"scenario", "harness", "realtime", "realtime/adapters", "procdriver", "spec", "history", "registry"},
	"tracing":            {"leasefence", "history", "leasefence/leaseotel"},
	"tracing/otelexport": {"tracing"},
	"report":             {"history"},
	"tui":                {"leasefence", "liveview", "history"},
	// The program and the benchmarks wire everything.
	"cmd/lab":              nil,
	"bench":                nil,
	"bench/plot":           nil,
	"internal/readmetest":  {},
	"internal/installtest": {"internal/readmetest"},
	"internal/layout":      {},
	"internal/peakrss":     {}, // peak memory of a command, for tests and benchmarks
	// Directories marked with their owner, removed once the owner is dead.
	"internal/scratch": {},
}

// wiring may import any package of ours.
var wiring = []string{"cmd/lab", "bench", "bench/plot"}

// imports lists each package of the lab's module with the packages of
// ours it imports (not its tests). It reads the sources in this process,
// so that go test's cache knows the files the answer came from.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	pkgs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
			rel == "leasefence" || strings.HasPrefix(rel, "leasefence/")) {
			return filepath.SkipDir // the library's modules have their own tests of their arrows
		}
		pkg, err := build.ImportDir(path, 0)
		var none *build.NoGoError
		if errors.As(err, &none) {
			return nil
		}
		if err != nil {
			return err
		}
		var ours []string
		for _, p := range pkg.Imports {
			if strings.HasPrefix(p, lab) {
				ours = append(ours, strings.TrimPrefix(p, lab))
			}
		}
		pkgs[rel] = ours
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// closure is every package of ours pkg links.
func closure(pkgs map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		for _, d := range pkgs[p] {
			if !seen[d] {
				seen[d] = true
				visit(d)
			}
		}
	}
	visit(pkg)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func TestArrows(t *testing.T) {
	pkgs := imports(t)
	if len(pkgs) < 10 || pkgs["history"] == nil {
		t.Fatalf("go list found %d packages, history importing %v: the listing is not the lab's", len(pkgs), pkgs["history"])
	}
	for pkg, deps := range pkgs {
		allowed, placed := arrows[pkg]
		if !placed {
			t.Errorf("package %s is not in the picture: add it to arrows, with what it may import", pkg)
			continue
		}
		if slices.Contains(wiring, pkg) {
			continue
		}
		for _, d := range deps {
			if !slices.Contains(allowed, d) {
				t.Errorf("%s imports %s, which the picture does not allow (it may import %s)", pkg, d, strings.Join(allowed, ", "))
			}
		}
	}
}

// scenario is the file format: what it links names no runner.
func TestScenarioLinksNoRunner(t *testing.T) {
	deps := closure(imports(t), "scenario")
	if !slices.Contains(deps, "spec") {
		t.Fatalf("scenario links %v, no spec: the listing is not scenario's", deps)
	}
	for _, runner := range []string{"harness", "realtime", "procdriver", "fixtures"} {
		if slices.Contains(deps, runner) {
			t.Errorf("scenario links %s", runner)
		}
	}
}

// The real-time runner links none of its adapters, directly or not: they
// register themselves, and the programs that run them link them.
func TestRealtimeLinksNoAdapter(t *testing.T) {
	deps := closure(imports(t), "realtime")
	if !slices.Contains(deps, "agent") {
		t.Fatalf("realtime links %v, no agent: the listing is not realtime's", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "realtime/") {
			t.Errorf("realtime links its adapter %s", d)
		}
	}
}

// The real-time core imports no store driver: what a store speaks to its
// database is its adapter's, which imports the driver and registers the
// store. So the core imports nothing beyond the standard library and the
// lab's own packages, and nothing for its side effects alone (a blank
// import is how a driver registers itself).
func TestRealtimeCoreImportsNoDriver(t *testing.T) {
	pkg := source(t, "realtime")
	if !slices.Contains(pkg.Imports, lab+"agent") {
		t.Fatalf("realtime imports %v, no agent: the listing is not realtime's", pkg.Imports)
	}
	for _, p := range pkg.Imports {
		if !strings.HasPrefix(p, lab) && strings.Contains(strings.Split(p, "/")[0], ".") {
			t.Errorf("realtime imports %s, a module beyond the standard library: a driver is its adapter's to import", p)
		}
	}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if imp.Name != nil && imp.Name.Name == "_" {
				t.Errorf("%s imports %s for its side effects: an adapter registers what it needs", fset.Position(imp.Pos()), imp.Path.Value)
			}
		}
	}
}

// The real-time core speaks no store's language: the proofs a store
// checks, and the forgers' made-up ones, are its adapter's (httpstore's,
// through realtime.ForgingStore and ProvingStore). So the core imports
// none of the library's modules but its contract, leasefence.
func TestRealtimeCoreImportsNoFence(t *testing.T) {
	pkg := source(t, "realtime")
	if !slices.Contains(pkg.Imports, lab+"leasefence") {
		t.Fatalf("realtime imports %v, no leasefence: the listing is not realtime's", pkg.Imports)
	}
	for _, p := range pkg.Imports {
		if strings.HasPrefix(p, lab+"leasefence/") {
			t.Errorf("realtime imports %s: what a store checks is its adapter's", p)
		}
	}
}

// homes are names with one home each: the package that defines them, as
// a constant, for every other to read. "Is this the simulator?" and the
// write disciplines are history's (the lowest package all their readers
// may import); a backend's name is the registry's.
var homes = map[string]string{
	`"sim"`:    "history", // history.Simulator, read by history.Simulated
	`"naive"`:  "history", // history.Naive, history.DisciplineNaive
	`"fenced"`: "history", // history.Fenced, history.DisciplineFenced
	`"redis"`:  "registry",
}

// No package spells a name of homes but its home: a second spelling is a
// second definition, free to drift from the first. Tests and test paths
// may spell what they check.
func TestNamesHaveOneHome(t *testing.T) {
	fset := token.NewFileSet()
	found := map[string]bool{}
	for rel := range imports(t) {
		if testPath(rel) {
			continue
		}
		for _, f := range parsed(t, fset, rel) {
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				home, named := homes[lit.Value]
				switch {
				case !named:
				case rel == home:
					found[lit.Value] = true
				default:
					t.Errorf("%s spells %s, whose home is %s: read it from there", fset.Position(lit.Pos()), lit.Value, home)
				}
				return true
			})
		}
	}
	for name, home := range homes {
		if !found[name] {
			t.Errorf("%s does not spell %s: the listing is not the lab's, or homes is out of date", home, name)
		}
	}
}

// source is the package of ours at rel (from the module's root), its
// tests left out.
// parsed are the package rel's Go files (its tests aside), parsed into
// fset.
func parsed(t *testing.T, fset *token.FileSet, rel string) []*ast.File {
	t.Helper()
	pkg := source(t, rel)
	var out []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func source(t *testing.T, rel string) *build.Package {
	t.Helper()
	pkg, err := build.ImportDir(filepath.Join("..", "..", filepath.FromSlash(rel)), 0)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// The lab's binary links no testing package, and nothing of ours from a
// test path (a path element such as etcdtest or tests): what it runs is
// runtime code.
func TestProgramLinksNoTesting(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", lab+"cmd/lab").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps lists %d packages: the listing is not the program's", len(deps))
	}
	for _, p := range deps {
		if p == "testing" || strings.HasPrefix(p, "testing/") {
			t.Errorf("cmd/lab links %s", p)
		}
		if rel, ours := strings.CutPrefix(p, lab); ours && testPath(rel) {
			t.Errorf("cmd/lab links %s, from a test path", p)
		}
	}
}

// testPath reports whether a package path of ours is a test path: one of
// its elements names tests (tests, testdata, etcdtest, leasetest, ...).
func testPath(rel string) bool {
	for _, e := range strings.Split(rel, "/") {
		if e == "tests" || e == "testdata" || strings.HasSuffix(e, "test") {
			return true
		}
	}
	return false
}

func TestTestPath(t *testing.T) {
	for rel, want := range map[string]bool{
		"leasefence/etcdlease/etcdtest/etcdembed": true, "leasefence/tests/etcdlease": true, "labtest": true,
		"realtime/internal/runtest": true, "leasefence/etcdlease/etcdembed": false, "realtime/sqlitestore": false,
		"realtime": false, "internal/layout": false,
	} {
		if got := testPath(rel); got != want {
			t.Errorf("testPath(%q) = %v, want %v", rel, got, want)
		}
	}
}
