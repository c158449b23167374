package leasefence

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestReasonDocListsEveryReason keeps `go doc Reason` complete: the type's
// doc comment names every Reason constant (go doc shows only the first).
func TestReasonDocListsEveryReason(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "protocol.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	var reasons []string
	ast.Inspect(f, func(n ast.Node) bool {
		g, ok := n.(*ast.GenDecl)
		if !ok {
			return true
		}
		for _, s := range g.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.Name == "Reason" {
					doc = g.Doc.Text()
				}
			case *ast.ValueSpec:
				if id, ok := s.Type.(*ast.Ident); ok && id.Name == "Reason" {
					for _, name := range s.Names {
						reasons = append(reasons, name.Name)
					}
				}
			}
		}
		return false
	})
	if len(reasons) == 0 {
		t.Fatal("no Reason constants found in protocol.go")
	}
	for _, r := range reasons {
		if !strings.Contains(doc, r+" (") {
			t.Errorf("Reason's doc comment does not list %s", r)
		}
	}
}
