package adapters_test

import (
	"testing"

	"github.com/leasefence/lab/realtime"
	_ "github.com/leasefence/lab/realtime/adapters"
	"github.com/leasefence/lab/registry"
)

// Every real backend, store and contender the registry names has its
// adapter linked here: a registry row without an adapter fails this test.
func TestEveryEntryHasAnAdapter(t *testing.T) {
	for _, e := range registry.All(registry.Backends) {
		if _, ok := registry.Opener[realtime.BackendAdapter](registry.Backends, e.Name); e.Real && !ok {
			t.Errorf("backend %s: no adapter linked", e.Name)
		}
	}
	for _, e := range registry.All(registry.Stores) {
		if _, ok := registry.Opener[realtime.StoreOpener](registry.Stores, e.Name); !ok {
			t.Errorf("resource %s: no adapter linked", e.Name)
		}
	}
	for _, e := range registry.All(registry.Contenders) {
		if e.Library == registry.Lab || e.Apart != "" {
			continue // the lab's own, run by the runner itself; or one its own module links and tests
		}
		if _, ok := registry.Opener[realtime.ContenderOpener](registry.Contenders, e.Name); !ok {
			t.Errorf("contender %s: no adapter linked", e.Name)
		}
	}
}
