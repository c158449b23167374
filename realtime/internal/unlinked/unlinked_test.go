// Package unlinked_test is a program that links the real-time runner and
// none of its adapters, to see it refuse their entries by name.
package unlinked_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// A backend or store whose adapter the program does not link is refused
// before anything starts, naming it; memory, the runner's own, runs.
func TestAdapterNotLinked(t *testing.T) {
	gap, ok := spec.Builtin("gap")
	if !ok {
		t.Fatal("no builtin scenario gap")
	}
	for _, tc := range []struct {
		c             realtime.Config
		setting, name string
	}{
		{realtime.Config{Backend: registry.Etcd}, "backend", "backend etcd"},
		{realtime.Config{Backend: registry.Redis}, "backend", "backend redis"},
		{realtime.Config{Backend: registry.Memory, Resource: registry.SQLite}, "resource", "resource sqlite"},
		{realtime.Config{Backend: registry.Memory, Resource: registry.HTTP}, "resource", "resource http"},
	} {
		err := tc.c.Check(gap)
		var ce *realtime.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, realtime.ErrNotLinked) || !errors.Is(err, realtime.ErrBadConfig) {
			t.Errorf("Check(%+v) = %v, want a *ConfigError matching ErrNotLinked and ErrBadConfig", tc.c, err)
			continue
		}
		if ce.Setting != tc.setting || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Check(%+v) = %q (setting %q), want setting %q naming %s", tc.c, err, ce.Setting, tc.setting, tc.name)
		}
		if _, err := realtime.Open(t.Context(), tc.c, gap); !errors.Is(err, realtime.ErrNotLinked) {
			t.Errorf("Open(%+v) = %v, want ErrNotLinked", tc.c, err)
		}
	}
	if err := (realtime.Config{Backend: registry.Memory}).Check(gap); err != nil {
		t.Errorf("memory, the runner's own: %v", err)
	}
}
