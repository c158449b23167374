package harness_test

import (
	"strings"
	"testing"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/spec"
)

// A fixed knob keeps the base scenario's value on every seed, and every
// other knob is drawn as it would have been with nothing fixed.
func TestSwarmKeepsFixedKnobs(t *testing.T) {
	base, _ := spec.Builtin("overlap")
	base.Network.DropReplies = 1
	base.Restarts = nil
	base.Agent.Stall = spec.Const(0)
	fixed := harness.DefaultSwarmRanges
	fixed.Fixed = []harness.SwarmKnob{harness.SwarmDropReplies, harness.SwarmRestarts, harness.SwarmStall}
	for seed := uint64(1); seed <= 50; seed++ {
		free := harness.SwarmScenario(base, harness.DefaultSwarmRanges, seed)
		sc := harness.SwarmScenario(base, fixed, seed)
		if sc.Network.DropReplies != 1 || len(sc.Restarts) != 0 || sc.Agent.Stall != spec.Const(0) {
			t.Fatalf("seed %d: drop replies %v, restarts %v, stall %+v: the fixed knobs were drawn", seed,
				sc.Network.DropReplies, sc.Restarts, sc.Agent.Stall)
		}
		free.Network.DropReplies, free.Restarts, free.Agent.Stall = 1, nil, spec.Const(0)
		free.Description, sc.Description = "", ""
		if free.Network != sc.Network || free.Clocks.DriftPPM != sc.Clocks.DriftPPM || free.ClockSkew != sc.ClockSkew || free.Push != sc.Push {
			t.Fatalf("seed %d: fixing three knobs changed the others' draws:\n%+v\n%+v", seed, free, sc)
		}
		if err := sc.Validate(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	if got := fixed.Drawn(); len(got) != len(harness.SwarmKnobs)-3 {
		t.Errorf("Drawn() = %v with three of %d fixed", got, len(harness.SwarmKnobs))
	}
}

// The scenario a swarm runs for a seed says what it drew, and only that.
func TestSwarmScenarioDescribesItsDraw(t *testing.T) {
	base, _ := spec.Builtin("overlap")
	ranges := harness.DefaultSwarmRanges
	ranges.Fixed = []harness.SwarmKnob{harness.SwarmDropReplies}
	sc := harness.SwarmScenario(base, ranges, 2)
	if !strings.HasPrefix(sc.Description, base.Description+"; swarm seed 2 drew drop requests ") ||
		strings.Contains(sc.Description, "drop replies") || !strings.Contains(sc.Description, "push ") {
		t.Errorf("description %q", sc.Description)
	}
}
