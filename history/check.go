package history

import (
	"fmt"
	"slices"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Checker judges one mode's history as it is told it, event by event. It
// reads nothing but the header and the events: the writes as each resource
// recorded them, the true times, what each agent believed and did. It never
// asks a gate, a coordinator or a simulator whether anything was safe.
type Checker struct {
	h      *Header
	mode   Mode
	read   *Reader
	digest digest
	events uint64

	acquisitions, renewals, denials, expiries, releases int
	minted, retries, lost, checksFailed, pushes         int
	lostCounter                                         bool
	libraryErrors                                       []string
}

// NewChecker returns a Checker for the mode events of a history with
// header h.
func NewChecker(h *Header, mode Mode) *Checker {
	return &Checker{h: h, mode: mode, read: NewReader(h), digest: newDigest(), lostCounter: h.LostCounter()}
}

// Reader returns the Reader the checker folds the history with.
func (c *Checker) Reader() *Reader { return c.read }

// Digest returns the hash of the events so far, as 16 hex digits.
func (c *Checker) Digest() string { return c.digest.String() }

// Add takes the next event of the mode's history.
func (c *Checker) Add(e *Event) {
	c.events++
	c.digest.add(e)
	c.read.Add(e)
	switch e.Kind {
	case Granted:
		c.minted++
	case Acquired:
		c.acquisitions++
	case Renewed:
		c.renewals++
	case Denied:
		c.denials++
	case Expired:
		c.expiries++
	case Released:
		c.releases++
	case RequestRetried:
		c.retries++
	case RequestDropped, ReplyDropped:
		c.lost++
	case CheckFailed:
		c.checksFailed++
	case AdmitPushed:
		c.pushes++
	case CoordinatorRestarted:
		c.lostCounter = c.lostCounter || e.Outcome == OutcomeCounterLost
	case LibraryError:
		c.libraryErrors = append(c.libraryErrors, e.Detail)
	}
}

// Check judges a whole history: each mode of the header, on its own
// events.
func Check(h Header, events []Event) *Result {
	res := NewResult(&h)
	checkers := make(map[Mode]*Checker, len(h.Modes))
	for _, m := range h.Modes {
		checkers[m] = NewChecker(&h, m)
	}
	for i := range events {
		if c, ok := checkers[events[i].Mode]; ok {
			c.Add(&events[i])
		}
	}
	for _, m := range h.Modes {
		res.Add(checkers[m].Report())
	}
	return res
}

// LibraryErrorViolation begins the violation of a LibraryError event.
const LibraryErrorViolation = "the library returned an error: "

// recWrites summarises one generation's writes.
type recWrites struct {
	firstLanded, lastLanded time.Duration
	landed, refused         int
}

// Report judges the history so far.
func (c *Checker) Report() *Report {
	h, rd := c.h, c.read
	gens, writes := rd.gens, rd.writes
	agentName := func(i int32) string {
		if i < 0 || int(i) >= len(h.Agents) {
			return ""
		}
		return h.Agents[i]
	}
	resName := func(i int32) string { return h.Resources[i] }
	r := &Report{
		Mode: c.mode, Digest: c.digest.String(), Events: c.events,
		Acquisitions: c.acquisitions, Renewals: c.renewals, Denials: c.denials, Expiries: c.expiries,
		Releases: c.releases, FencesMinted: c.minted, Retries: c.retries, MessagesLost: c.lost,
		ChecksFailed: c.checksFailed, PushesApplied: c.pushes,
	}
	cx := counterexamples{}
	per := make([]ResourceReport, len(h.Resources))
	for i := range per {
		per[i].Resource = h.Resources[i]
	}

	// (a) Stale writes: a write that landed after a higher fence's write.
	byGen := make([]recWrites, len(gens))
	for _, w := range writes {
		p := &per[w.Resource]
		if w.Refused {
			p.CommitsRefused++
			r.CommitsRefused++
			if w.Gen >= 0 {
				byGen[w.Gen].refused++
			}
			continue
		}
		p.CommitsAdmitted++
		r.CommitsAdmitted++
		if w.Gen >= 0 {
			rw := &byGen[w.Gen]
			if rw.landed == 0 {
				rw.firstLanded = w.At
			}
			rw.lastLanded = w.At
			rw.landed++
		}
		if w.Stale {
			floor, by := w.FloorFence, w.FloorAgent
			p.StaleWritesLanded++
			r.StaleWritesLanded++
			cx.add(Counterexample{Kind: StaleWrite, AtMS: ms(w.At), Resource: resName(w.Resource),
				Holder: agentName(w.Agent), Fence: w.Fence, Other: agentName(by), OtherFence: floor,
				Detail: fmt.Sprintf("fence %d landed after fence %d had landed, with no error", w.Fence, floor)})
		}
	}
	for i := range per {
		f, by := rd.Floor(i)
		per[i].FloorFence = f
		if f > 0 {
			per[i].FloorHolder = agentName(by)
		}
	}

	// (b) Overlaps: two holders acting as holder of one resource at one true
	// instant, from completing the acquire to the later of their believed
	// deadline and their last write.
	byRes := make([][]int32, len(h.Resources))
	for i := range gens {
		if gens[i].Believed() {
			byRes[gens[i].Resource] = append(byRes[gens[i].Resource], int32(i))
		}
	}
	for ri, ids := range byRes {
		slices.SortStableFunc(ids, func(a, b int32) int { return int(gens[a].Start - gens[b].Start) })
		for x, i := range ids {
			li := &gens[i]
			for _, j := range ids[x+1:] {
				lj := &gens[j]
				if lj.Start >= li.Acting() {
					break
				}
				if lj.Agent == li.Agent {
					continue
				}
				older, newer := i, j // mint order
				if older > newer {
					older, newer = newer, older
				}
				lo, ln := &gens[older], &gens[newer]
				wo, wn := byGen[older], byGen[newer]
				r.Overlaps++
				per[ri].Overlaps++
				at := max(li.Start, lj.Start)
				switch {
				case wo.landed > 0 && wn.landed > 0 && wo.lastLanded > wn.firstLanded:
					r.SilentOverlaps++
					per[ri].SilentOverlaps++
					cx.add(Counterexample{Kind: SilentOverlap, AtMS: ms(at), Resource: resName(int32(ri)),
						Holder: agentName(lo.Agent), Fence: lo.Fence, Other: agentName(ln.Agent), OtherFence: ln.Fence,
						Detail: fmt.Sprintf("both believed they held it; %s@%d wrote at %.3fms after %s@%d had written at %.3fms",
							agentName(lo.Agent), lo.Fence, ms(wo.lastLanded), agentName(ln.Agent), ln.Fence, ms(wn.firstLanded))})
				case wo.refused > 0 || wn.refused > 0:
					r.RefusedOverlaps++
					cx.add(Counterexample{Kind: RefusedWrite, AtMS: ms(at), Resource: resName(int32(ri)),
						Holder: agentName(lo.Agent), Fence: lo.Fence, Other: agentName(ln.Agent), OtherFence: ln.Fence,
						Detail: "both believed they held it; the gate refused the stale write and logged both"})
				}
			}
		}
	}

	// (c) Containment: a holder believing its lease valid after the
	// coordinator had let it go.
	for i := range gens {
		g := &gens[i]
		if !g.Believed() || g.BeliefEnd <= g.CoordEnd {
			continue
		}
		r.ContainmentBreaches++
		cx.add(Counterexample{Kind: ContainmentBreach, AtMS: ms(g.CoordEnd), Resource: resName(g.Resource),
			Holder: agentName(g.Agent), Fence: g.Fence,
			Detail: fmt.Sprintf("believed valid until %.3fms; the coordinator let it go at %.3fms (%.3fms earlier)",
				ms(g.BeliefEnd), ms(g.CoordEnd), ms(g.BeliefEnd-g.CoordEnd))})
	}

	// (d) Fences strictly increase in mint order, across restarts.
	var top leasefence.Fence
	for i := range gens {
		g := &gens[i]
		if g.Fence <= top {
			r.FenceReuses++
			cx.add(Counterexample{Kind: FenceReuse, AtMS: ms(g.Granted), Resource: resName(g.Resource),
				Holder: agentName(g.Agent), Fence: g.Fence, OtherFence: top,
				Detail: fmt.Sprintf("fence %d minted after fence %d (coordinator incarnation %d)", g.Fence, top, g.Incarnation+1)})
			continue
		}
		top = g.Fence
	}

	// (e) Every refusal is explained by an overlap or by a fence reused
	// after a restart that lost the counter.
	if c.mode == Fenced {
		byFloor := make(map[floorKey][]int32, len(gens))
		for i := range gens {
			g := &gens[i]
			k := floorKey{g.Resource, g.Fence, g.Agent}
			byFloor[k] = append(byFloor[k], int32(i))
		}
		nth := make([]int, len(h.Resources))
		for k := range writes {
			w := &writes[k]
			if !w.Refused {
				continue
			}
			nth[w.Resource]++
			if explained(gens, byFloor, w) {
				continue
			}
			r.UnexplainedRefusals++
			cx.add(Counterexample{Kind: UnexplainedRefusal, AtMS: ms(w.At), Resource: resName(w.Resource),
				Holder: agentName(w.Agent), Fence: w.Fence, Other: agentName(w.FloorAgent), OtherFence: w.FloorFence,
				Detail: fmt.Sprintf("refusal #%d at %s has no overlap or fence reuse behind it", nth[w.Resource], resName(w.Resource))})
		}
	}

	r.PerResource = per
	r.Counterexamples = cx.list()
	if c.mode == Fenced {
		r.Violations = c.violations(r)
	}
	for _, d := range c.libraryErrors {
		r.Violations = append(r.Violations, LibraryErrorViolation+d)
	}
	return r
}

// floorKey finds the generations a gate's floor may name.
type floorKey struct {
	resource int32
	fence    leasefence.Fence
	agent    int32
}

// explained reports whether a refusal had a cause: the refused holder acted
// on the resource while the floor's lease was live at the coordinator or its
// holder acted on it (counted from when the coordinator minted it, since a
// push can raise the floor before its holder hears of the grant), the floor
// is the refused holder's own newer lease, or the refused fence was
// reissued by a coordinator that restarted without its counter.
func explained(gens []Generation, byFloor map[floorKey][]int32, w *Write) bool {
	if w.Gen < 0 {
		return false
	}
	refused := &gens[w.Gen]
	for _, i := range byFloor[floorKey{w.Resource, w.FloorFence, w.FloorAgent}] {
		f := &gens[i]
		if f.Granted > w.At {
			continue
		}
		switch {
		case f.Agent == refused.Agent && f.Fence > refused.Fence:
			return true
		case f.Incarnation < refused.Incarnation:
			return true // the refused fence was reissued after a restart that lost the counter
		case refused.Start <= max(f.Acting(), f.CoordEnd):
			return true // the floor's lease was live, or its holder acting, while the refused holder acted
		}
	}
	return false
}

// violations names the invariants the fenced mode promises under the
// header's assumptions and r shows broken.
func (c *Checker) violations(r *Report) []string {
	var v []string
	if r.StaleWritesLanded > 0 {
		v = append(v, fmt.Sprintf("%d stale writes landed through the gate", r.StaleWritesLanded))
	}
	if r.ContainmentBreaches > 0 && c.h.Clocks.WithinBudget {
		v = append(v, fmt.Sprintf("%d containment breaches with drift inside the skew budget", r.ContainmentBreaches))
	}
	if r.FenceReuses > 0 && !c.lostCounter {
		v = append(v, fmt.Sprintf("%d fences reused with no restart that lost the counter", r.FenceReuses))
	}
	if r.UnexplainedRefusals > 0 {
		v = append(v, fmt.Sprintf("%d refusals with no overlap behind them", r.UnexplainedRefusals))
	}
	return v
}

// counterexamples keeps the first MaxCounterexamples of each kind.
type counterexamples struct {
	byKind map[CounterexampleKind][]Counterexample
	order  []CounterexampleKind
}

func (c *counterexamples) add(x Counterexample) {
	if c.byKind == nil {
		c.byKind = make(map[CounterexampleKind][]Counterexample)
	}
	if _, seen := c.byKind[x.Kind]; !seen {
		c.order = append(c.order, x.Kind)
	}
	if len(c.byKind[x.Kind]) < MaxCounterexamples {
		c.byKind[x.Kind] = append(c.byKind[x.Kind], x)
	}
}

func (c *counterexamples) list() []Counterexample {
	out := []Counterexample{}
	for _, k := range c.order {
		out = append(out, c.byKind[k]...)
	}
	return out
}
