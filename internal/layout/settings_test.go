package layout_test

import (
	"go/ast"
	"go/token"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/leasefence/lab/realtime"
	_ "github.com/leasefence/lab/realtime/adapters" // each backend's settings, as its adapter registers them
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/scenario"
)

// A backend's settings live in its adapter, as docs/adding-a-backend.md
// walks through: the struct it registers (registry.Settings) is decoded
// from the fixture's key named as the backend and from its flags
// --<backend>-<key>, and read by the adapter alone. So neither the
// runner's configuration nor a fixture has a field of that backend's,
// and neither the command, the fixtures, the scenario files, the report
// nor the runner's core spells one of its flags.
func TestSettingsLiveInTheAdapter(t *testing.T) {
	backends := registry.WithSettings()
	if len(backends) == 0 {
		t.Fatal("no adapter registers settings: the test checks nothing")
	}
	for _, name := range backends {
		prefix := strings.ToUpper(name[:1]) + name[1:]
		for _, typ := range []reflect.Type{reflect.TypeFor[realtime.Config](), reflect.TypeFor[scenario.Fixture]()} {
			for i := range typ.NumField() {
				if f := typ.Field(i); strings.HasPrefix(f.Name, prefix) {
					t.Errorf("%s.%s: a setting of backend %s, which its adapter's registry.Settings holds", typ, f.Name, name)
				}
			}
		}
		st, _ := registry.Opener[registry.Settings](registry.Backends, name)
		flags := map[string]bool{}
		for _, f := range registry.SettingFields(name, st.New()) {
			flags[f.Flag], flags["--"+f.Flag] = true, true
		}
		fset := token.NewFileSet()
		for _, rel := range append([]string{"realtime"}, aboveAdapters...) {
			for _, f := range parsed(t, fset, rel) {
				ast.Inspect(f, func(n ast.Node) bool {
					if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil && flags[s] {
							t.Errorf("%s spells %s, a flag of backend %s's settings: its adapter's registry.Settings makes it", fset.Position(lit.Pos()), s, name)
						}
					}
					return true
				})
			}
		}
	}
}
