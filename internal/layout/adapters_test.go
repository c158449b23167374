package layout_test

import (
	"strings"
	"testing"
)

// aboveAdapters are the packages a new backend, store or contender must
// not have to touch (docs/adding-a-backend.md): they name no adapter, and
// reach every one through realtime/adapters, which links them all, and
// the registry, where each registers itself.
var aboveAdapters = []string{"cmd/lab", "fixtures", "scenario", "report", "tui", "tracing"}

// The program, the fixtures' runner, the scenario files and what reads a
// history import no adapter: what one adapter differs in (its settings'
// checks, the servers it runs as this binary, the faults of its servers)
// it states through realtime's seam and registers, and the core and these
// ask for it knowing no adapter's name.
func TestNoAdapterAbove(t *testing.T) {
	pkgs := imports(t)
	for _, p := range aboveAdapters {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("no package %s", p)
		}
		for _, d := range pkgs[p] {
			if adapter(d) {
				t.Errorf("%s imports %s, an adapter: let it register what %s needs of it (realtime/adapter.go), and link it through realtime/adapters", p, d, p)
			}
		}
	}
}

// adapter reports whether p is one of the real-time runner's adapters (or
// what one of them runs, as realtime/etcdcluster its members): a package
// below realtime but the one that links them all and the runner's own
// internal helpers.
func adapter(p string) bool {
	return strings.HasPrefix(p, "realtime/") && p != "realtime/adapters" && !strings.HasPrefix(p, "realtime/internal/")
}
