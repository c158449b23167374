package procdriver_test

import (
	"errors"
	"testing"

	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// With this package linked, every driver the registry names has its
// opener, so a program runs the one a flag or a fixture names knowing
// none; the process driver's check is this package's, and its refusals
// wrap the Refused it states.
func TestEveryDriverIsRegistered(t *testing.T) {
	for _, name := range registry.Names(registry.Drivers) {
		if d, err := realtime.DriverFor(name); err != nil || d.New == nil {
			t.Errorf("driver %s: %+v, %v; want a registered driver", name, d, err)
		}
	}
	d, err := realtime.DriverFor(registry.Process)
	if err != nil {
		t.Fatal(err)
	}
	drift := spec.Scenario{Clocks: spec.Clocks{CoordinatorDriftPPM: 100}}
	if err := d.Check(realtime.Config{Backend: registry.Redis}, drift); !errors.Is(err, d.Refused) || !errors.Is(err, procdriver.ErrCannotPlay) {
		t.Errorf("a drifting coordinator: %v, want a refusal wrapping Refused (ErrCannotPlay)", err)
	}
}
