package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Forgery is how a forger makes up the proof it presents with its write.
// Every forger claims the highest fence there is, which would raise the
// resource's floor for good and lock every honest holder out.
type Forgery string

// The forgeries.
const (
	// ForgeOwnKey signs a proof with a key of its own, under the
	// coordinator's key id and issuer.
	ForgeOwnKey Forgery = "own_key"
	// ForgeTampered takes a proof the coordinator signed and rewrites its
	// claims (holder and fence), keeping the signature.
	ForgeTampered Forgery = "tampered"
	// ForgeAlgNone presents an unsigned proof: header alg "none".
	ForgeAlgNone Forgery = "alg_none"
	// ForgeReplayed presents a genuine proof the coordinator signed for
	// another resource: it verifies, and the gate must refuse it.
	ForgeReplayed Forgery = "replayed"
)

// Forgeries lists every forgery, in the order a count of forgers takes
// them.
var Forgeries = []Forgery{ForgeOwnKey, ForgeTampered, ForgeAlgNone, ForgeReplayed}

// MaxForgers bounds a scenario's forgers.
const MaxForgers = 64

// CountForgers returns n forgers, taking the forgeries in turn: what a
// scenario file's `forgers: N` means.
func CountForgers(n int) []Forgery {
	out := make([]Forgery, n)
	for i := range out {
		out[i] = Forgeries[i%len(Forgeries)]
	}
	return out
}

// ForgerName is the name of forger i (0-based): "forger-1", ...
func ForgerName(i int) string { return fmt.Sprintf("forger-%d", i+1) }

// ErrOverTheWire refuses a scenario with forgers or a write delay on the
// wire where no resource sits across a network: the simulator, and the
// real-time stores other than http.
var ErrOverTheWire = errors.New("forgers and network.write_delay need a resource across a network (--resource http)")

// OverTheWire reports whether sc asks for what only a resource across a
// network plays: forgers, or a write delay on the wire.
func (s *Scenario) OverTheWire() bool {
	return len(s.Forgers) > 0 || s.Network.WriteDelay != (Dist{})
}

func (s *Scenario) validateForgers(bad complaint) {
	if len(s.Forgers) > MaxForgers {
		bad("forgers", "at most %d, got %d", MaxForgers, len(s.Forgers))
	}
	for i, f := range s.Forgers {
		if !slices.Contains(Forgeries, f) {
			names := make([]string, len(Forgeries))
			for j, g := range Forgeries {
				names[j] = string(g)
			}
			bad(fmt.Sprintf("forgers[%d]", i), "must be %s, got %q", strings.Join(names, ", "), f)
		} else if f == ForgeReplayed && s.Resources < 2 {
			bad(fmt.Sprintf("forgers[%d]", i), "replayed presents a proof for another resource: it needs at least 2 resources, got %d", s.Resources)
		}
	}
}
