package layout_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// A kind of the faults list (the faults of a backend's own servers) lives
// in three places, as docs/adding-a-backend.md walks through: its line in
// spec (timedKinds), its registry statement (which backends play it), and
// the adapter that plays it (realtime.FaultPlayer). No other package
// names one, by its constant or its spelling: the runner schedules every
// kind alike, and the report, the page, the dashboard and the traces read
// it off the history's fault events.
func TestFaultKindsHaveThreeHomes(t *testing.T) {
	consts, spellings := timedKinds(t)
	if len(consts) == 0 {
		t.Fatal("spec's timedKinds names no kind: the test no longer reads it")
	}
	fset := token.NewFileSet()
	for rel := range imports(t) {
		if testPath(rel) || rel == "spec" || rel == "registry" || (adapter(rel) && rel != "realtime/etcdcluster") {
			continue
		}
		for _, f := range parsed(t, fset, rel) {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "spec" && consts[n.Sel.Name] {
						t.Errorf("%s names spec.%s, a kind of the faults list: only spec, the registry and the adapter that plays it do", fset.Position(n.Pos()), n.Sel.Name)
					}
				case *ast.BasicLit:
					if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && spellings[s] {
						t.Errorf("%s spells %q, a kind of the faults list: read it from the history's events or spec", fset.Position(n.Pos()), s)
					}
				}
				return true
			})
		}
	}
}

// timedKinds reads spec's timedKinds: the constants it is keyed by, and
// how each is spelled.
func timedKinds(t *testing.T) (consts, spellings map[string]bool) {
	t.Helper()
	consts, spellings = map[string]bool{}, map[string]bool{}
	pkg := source(t, "spec")
	fset := token.NewFileSet()
	values := map[string]string{}
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							values[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
					if id.Name != "timedKinds" || i >= len(n.Values) {
						continue
					}
					if m, ok := n.Values[i].(*ast.CompositeLit); ok {
						for _, el := range m.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok {
								if k, ok := kv.Key.(*ast.Ident); ok {
									consts[k.Name] = true
								}
							}
						}
					}
				}
			}
			return true
		})
	}
	for c := range consts {
		if v, ok := values[c]; ok {
			spellings[v] = true
		} else {
			t.Errorf("spec's timedKinds is keyed by %s, whose spelling the test cannot read", c)
		}
	}
	return consts, spellings
}
