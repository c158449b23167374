package realtime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// The runner registers its own driver; a driver the registry names but
// this program does not link, and a name it does not know, are refused
// by name, matching ErrNoDriver.
func TestDriverFor(t *testing.T) {
	if d, err := realtime.DriverFor(registry.InProcess); err != nil || d.New == nil {
		t.Fatalf("in-process: %+v, %v; want the runner's own driver", d, err)
	}
	for _, tc := range []struct{ name, want string }{
		{registry.Process, "does not link the driver process (procdriver registers process)"},
		{"threads", `must be in-process or process, got "threads"`},
	} {
		_, err := realtime.DriverFor(tc.name)
		if !errors.Is(err, realtime.ErrNoDriver) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrNoDriver and %q", tc.name, err, tc.want)
		}
	}
}
