package etcdlease_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// Every etcd client the examples build has a logger of its own: at etcd's
// default, a program written from them prints a JSON warning on every wake
// from a pause, for the renewal its session gave up on (etcdlease's doc,
// "etcd's client logs"). The library leaves a user's logger alone; the
// examples are where it shows what to set.
func TestExampleClientsSetALogger(t *testing.T) {
	files, err := filepath.Glob("example_*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files: %v", err)
	}
	fset := token.NewFileSet()
	configs := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok || !isClientConfig(lit.Type) {
				return true
			}
			configs++
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "Logger" || k.Name == "LogConfig") {
						return true
					}
				}
			}
			t.Errorf("%s: a clientv3.Config left at etcd's default logger", fset.Position(lit.Pos()))
			return true
		})
	}
	if configs == 0 {
		t.Error("no clientv3.Config in the examples: nothing was checked")
	}
}

// isClientConfig reports whether x is the type clientv3.Config.
func isClientConfig(x ast.Expr) bool {
	sel, ok := x.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Config" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "clientv3"
}
