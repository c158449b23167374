package spec_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/spec"
)

// The crowd of 100,000 agents for a day is refused before it starts; every
// built-in scenario, as it is, stays far under the bound.
func TestWorkEstimate(t *testing.T) {
	crowd, _ := spec.Builtin("crowd")
	crowd.Agents, crowd.Resources, crowd.Duration = 100_000, 100_000, 24*time.Hour
	if err := crowd.Validate(); err != nil {
		t.Fatal(err)
	}
	err := crowd.CheckWork(spec.DefaultMaxEvents)
	if !errors.Is(err, spec.ErrTooMuchWork) {
		t.Fatalf("the crowd of 100000 for 24h: %v, want ErrTooMuchWork", err)
	}
	if est := crowd.EstimatedEvents(); est < 1e10 {
		t.Errorf("the crowd of 100000 for 24h: %.3g events estimated, want above 1e10", est)
	}
	if err := crowd.CheckWork(0); err != nil {
		t.Errorf("no bound: %v", err)
	}
	for _, name := range spec.BuiltinNames() {
		sc, _ := spec.Builtin(name)
		if est := sc.EstimatedEvents(); est > spec.DefaultMaxEvents/20 || est <= 0 {
			t.Errorf("%s: %.3g events estimated, want in (0, %d]", name, est, spec.DefaultMaxEvents/20)
		}
	}
}
