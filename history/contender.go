package history

import (
	"fmt"
	"slices"

	"github.com/leasefence/lab/leasefence"
)

// Discipline is how a contender's holders write to the resource.
type Discipline string

// The write disciplines.
const (
	// DisciplineNaive: the holder checks its own deadline and writes
	// straight to the resource.
	DisciplineNaive Discipline = "naive"
	// DisciplineFenced: the holder writes through the resource's gate
	// with its lease's fence; the checker holds such a mode to the fenced
	// invariants.
	DisciplineFenced Discipline = "fenced"
)

// Contender describes what one mode of a run ran: a lock implementation,
// named by the mode.
type Contender struct {
	Name       Mode       `json:"name"`
	Library    string     `json:"library,omitempty"`
	Version    string     `json:"version,omitempty"`
	Fence      bool       `json:"fence"`
	Discipline Discipline `json:"discipline"`
	// Generations says how the lease generations of a lock run in place
	// of the lab's coordinator were numbered: "fence" (the lock's own),
	// "server" (the order its server shows, such as etcd's create
	// revision of the lock key) or "observed" (the order in which the lab
	// saw the grants return, for a lock that shows none); "" for the
	// lab's own coordinator, whose fences they are.
	Generations string `json:"generations,omitempty"`
	// NotExpressible names the rules of the lease contract the lock's API
	// cannot express, each with why: the checker reports such a rule n/a
	// and never charges the lock with it. Absent, every rule is
	// expressible and judged.
	NotExpressible map[ContractRule]string `json:"not_expressible,omitempty"`
}

// ContractRule names a rule of the lease contract a lock's API may be
// unable to express (Contender.NotExpressible).
type ContractRule string

// RuleReleaseAfterEnd: Release of a lease no longer live returns an error
// matching ErrNotHeld.
const RuleReleaseAfterEnd ContractRule = "release-after-end"

// NotExpressible reports whether mode m's lock cannot express rule, and
// why.
func (h *Header) NotExpressible(m Mode, rule ContractRule) (why string, ok bool) {
	why, ok = h.Contender(m).NotExpressible[rule]
	return why, ok
}

// LabLibrary is the Library of the lab's own two contenders.
const LabLibrary = "leasefence lab"

// builtin are the lab's own two contenders, which a header need not
// describe: a history of them alone reads as it always has.
var builtin = []Contender{
	{Name: Naive, Library: LabLibrary, Discipline: DisciplineNaive},
	{Name: Fenced, Library: LabLibrary, Fence: true, Discipline: DisciplineFenced},
}

// Contender describes mode m: as the header's Contenders say, else as the
// lab's own naive or fenced. A mode neither names is described by its
// name alone (no fence, no discipline): Validate refuses such a header.
func (h *Header) Contender(m Mode) Contender {
	for _, cs := range [][]Contender{h.Contenders, builtin} {
		if i := slices.IndexFunc(cs, func(c Contender) bool { return c.Name == m }); i >= 0 {
			return cs[i]
		}
	}
	return Contender{Name: m}
}

// LateGrant reports whether a grant of generation g in mode m, on a
// resource whose newest grant recorded so far is generation newest, is
// one the lock made before that one and the lab recorded after it. The
// lab records a grant when its reply is back with the lab (an agent's
// process paused by SIGSTOP right after its lock answered records it when
// it wakes); a library's lock numbers its generations in its own order
// (its fence, its server's), so a lower one is earlier. Such a grant took
// over nothing: the checker judges neither its exclusion nor its fence,
// and never blames the lab's record order on the lock. The lab's own
// coordinator mints in the order it records.
func (h *Header) LateGrant(m Mode, g, newest leasefence.Fence) bool {
	return h.Contender(m).Generations != "" && g < newest
}

// FenceWord is what the numbers that name mode m's lease generations
// are called where they are printed: "fence" when they are fences (the
// lab's coordinator's, or the lock's own), "generation" when they are an
// order the lock never handed its holders (its server's, or the order in
// which the lab saw the grants): those are never the lock's fence.
func (h *Header) FenceWord(m Mode) string { return h.Contender(m).FenceWord() }

// FenceWord is Header.FenceWord of the mode c describes.
func (c Contender) FenceWord() string {
	if c.Generations == "" || c.Generations == "fence" {
		return "fence"
	}
	return "generation"
}

// Fenced reports whether mode m writes through the gate with its fence,
// and so is held to the fenced invariants.
func (h *Header) Fenced(m Mode) bool { return h.Contender(m).Discipline == DisciplineFenced }

// validateContenders reports the first mode of h it cannot describe, or
// the first contender it describes badly.
func (h *Header) validateContenders() error {
	for _, c := range h.Contenders {
		if c.Name == "" || (c.Discipline != DisciplineNaive && c.Discipline != DisciplineFenced) || (c.Discipline == DisciplineFenced && !c.Fence) {
			return fmt.Errorf("%w: header contender %+v: a name, and a discipline naive or fenced (fenced needs a fence)", ErrBadHistory, c)
		}
		for rule, why := range c.NotExpressible {
			if rule != RuleReleaseAfterEnd || why == "" {
				return fmt.Errorf("%w: header contender %s: not_expressible %q: a rule of the lease contract (%s), and why its lock cannot express it",
					ErrBadHistory, c.Name, rule, RuleReleaseAfterEnd)
			}
		}
	}
	for _, m := range h.Modes {
		if h.Contender(m).Discipline == "" {
			return fmt.Errorf("%w: header mode %q is neither fenced nor naive, and no contender describes it", ErrBadHistory, m)
		}
	}
	return nil
}

// ReportOrder lists modes as reports show them: naive, then fenced, then
// any other contender by name.
func ReportOrder(modes []Mode) []Mode {
	out := make([]Mode, 0, len(modes))
	for _, b := range builtin {
		if slices.Contains(modes, b.Name) {
			out = append(out, b.Name)
		}
	}
	var others []Mode
	for _, m := range modes {
		if !slices.Contains(out, m) && !slices.Contains(others, m) {
			others = append(others, m)
		}
	}
	slices.Sort(others)
	return append(out, others...)
}
