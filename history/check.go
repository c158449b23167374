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
	writesFailed                                        int
	lostCounter                                         bool
	libraryErrors                                       []string
	unreadable                                          []string // what Add could not read, in order
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
	if err := c.read.Add(e); err != nil {
		c.unreadable = append(c.unreadable, err.Error())
		return
	}
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
	case WriteFailed:
		c.writesFailed++
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
	j := c.newJudgement()
	byGen := j.writes()
	j.overlaps(byGen)
	j.containment()
	j.fenceReuses()
	if c.mode == Fenced {
		j.refusals()
	}
	r := j.r
	r.PerResource = j.per
	r.Counterexamples = j.cx.list()
	j.forgeries()
	if c.mode == Fenced {
		r.Violations = c.violations(r)
	}
	for _, d := range c.libraryErrors {
		r.Violations = append(r.Violations, LibraryErrorViolation+d)
	}
	if n := len(c.unreadable); n > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%s%s (the first: %s)",
			Plural(n, "event", "events"), UnreadableViolation, c.unreadable[0]))
	}
	return r
}

// UnreadableViolation follows the count of the events the checker could
// not read in their violation.
const UnreadableViolation = " the checker could not read"

// judgement is one Report in the making: the Reader's view of the history,
// and the counters and counterexamples each part of the verdict adds to.
type judgement struct {
	c    *Checker
	h    *Header
	rd   *Reader
	gens []Generation
	r    *Report
	per  []ResourceReport
	cx   counterexamples
}

func (c *Checker) newJudgement() *judgement {
	h := c.h
	j := &judgement{c: c, h: h, rd: c.read, gens: c.read.gens, per: make([]ResourceReport, len(h.Resources))}
	j.r = &Report{
		Mode: c.mode, Digest: c.digest.String(), Events: c.events,
		Acquisitions: c.acquisitions, Renewals: c.renewals, Denials: c.denials, Expiries: c.expiries,
		Releases: c.releases, FencesMinted: c.minted, Retries: c.retries, MessagesLost: c.lost,
		ChecksFailed: c.checksFailed, PushesApplied: c.pushes, WritesFailed: c.writesFailed,
	}
	for i := range j.per {
		j.per[i].Resource = h.Resources[i]
	}
	return j
}

func (j *judgement) agent(i int32) string {
	if i < 0 || int(i) >= len(j.h.Agents) {
		return ""
	}
	return j.h.Agents[i]
}

func (j *judgement) resource(i int32) string { return j.h.Resources[i] }

// writes counts the writes at each resource: admitted, refused, stale
// (landed after a write of a newer generation), and landed under a
// reissued fence; and returns each generation's writes, for the overlaps.
func (j *judgement) writes() []recWrites {
	r := j.r
	byGen := make([]recWrites, len(j.gens))
	for _, w := range j.rd.writes {
		p := &j.per[w.Resource]
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
		if w.Reissued {
			p.ReissuedWritesLanded++
			r.ReissuedWritesLanded++
		}
		if w.Stale {
			p.StaleWritesLanded++
			r.StaleWritesLanded++
			j.cx.add(Counterexample{Kind: StaleWrite, AtMS: ms(w.At), Resource: j.resource(w.Resource),
				Holder: j.agent(w.Agent), Fence: w.Fence, Other: j.agent(w.FloorAgent), OtherFence: w.FloorFence,
				Detail: staleDetail(&w)})
		}
	}
	for i := range j.per {
		f, by := j.rd.Floor(i)
		j.per[i].FloorFence = f
		if f > 0 {
			j.per[i].FloorHolder = j.agent(by)
		}
	}
	return byGen
}

func staleDetail(w *Write) string {
	if w.Fence >= w.FloorFence {
		return fmt.Sprintf("fence %d landed after fence %d of a newer lease generation had landed, with no error", w.Fence, w.FloorFence)
	}
	return fmt.Sprintf("fence %d landed after fence %d had landed, with no error", w.Fence, w.FloorFence)
}

// overlaps counts pairs of holders acting as holder of one resource at one
// true instant, from completing the acquire to the later of their believed
// deadline and their last write.
func (j *judgement) overlaps(byGen []recWrites) {
	gens := j.gens
	byRes := make([][]int32, len(j.h.Resources))
	for i := range gens {
		if gens[i].Believed() {
			byRes[gens[i].Resource] = append(byRes[gens[i].Resource], int32(i))
		}
	}
	for ri, ids := range byRes {
		slices.SortStableFunc(ids, func(a, b int32) int { return int(gens[a].Start - gens[b].Start) })
		for x, i := range ids {
			li := &gens[i]
			for _, k := range ids[x+1:] {
				lk := &gens[k]
				if lk.Start >= li.Acting() {
					break
				}
				if lk.Agent != li.Agent {
					j.overlap(int32(ri), i, k, byGen)
				}
			}
		}
	}
}

// overlap records that generations a and b of resource ri overlapped.
func (j *judgement) overlap(ri, a, b int32, byGen []recWrites) {
	older, newer := min(a, b), max(a, b) // mint order
	lo, ln := &j.gens[older], &j.gens[newer]
	wo, wn := byGen[older], byGen[newer]
	j.r.Overlaps++
	j.per[ri].Overlaps++
	at := max(lo.Start, ln.Start)
	switch {
	case wo.landed > 0 && wn.landed > 0 && wo.lastLanded > wn.firstLanded:
		j.r.SilentOverlaps++
		j.per[ri].SilentOverlaps++
		j.cx.add(Counterexample{Kind: SilentOverlap, AtMS: ms(at), Resource: j.resource(ri),
			Holder: j.agent(lo.Agent), Fence: lo.Fence, Other: j.agent(ln.Agent), OtherFence: ln.Fence,
			Detail: fmt.Sprintf("both believed they held it; %s@%d wrote at %s after %s@%d had written at %s",
				j.agent(lo.Agent), lo.Fence, FormatDuration(wo.lastLanded), j.agent(ln.Agent), ln.Fence, FormatDuration(wn.firstLanded))})
	case wo.refused > 0 || wn.refused > 0:
		j.r.RefusedOverlaps++
		j.cx.add(Counterexample{Kind: RefusedWrite, AtMS: ms(at), Resource: j.resource(ri),
			Holder: j.agent(lo.Agent), Fence: lo.Fence, Other: j.agent(ln.Agent), OtherFence: ln.Fence,
			Detail: "both believed they held it; the gate refused the stale write and logged both"})
	}
}

// containment counts holders believing their lease valid after the
// coordinator had let it go.
func (j *judgement) containment() {
	for i := range j.gens {
		g := &j.gens[i]
		if !g.Believed() || g.BeliefEnd <= g.CoordEnd {
			continue
		}
		j.r.ContainmentBreaches++
		j.cx.add(Counterexample{Kind: ContainmentBreach, AtMS: ms(g.CoordEnd), Resource: j.resource(g.Resource),
			Holder: j.agent(g.Agent), Fence: g.Fence,
			Detail: fmt.Sprintf("believed valid until %s; the coordinator let it go at %s (%s earlier)",
				FormatDuration(g.BeliefEnd), FormatDuration(g.CoordEnd), FormatDuration(g.BeliefEnd-g.CoordEnd))})
	}
}

// fenceReuses counts fences that were not above every fence minted before
// them, across restarts.
func (j *judgement) fenceReuses() {
	var top leasefence.Fence
	for i := range j.gens {
		g := &j.gens[i]
		if g.Fence <= top {
			j.r.FenceReuses++
			j.cx.add(Counterexample{Kind: FenceReuse, AtMS: ms(g.Granted), Resource: j.resource(g.Resource),
				Holder: j.agent(g.Agent), Fence: g.Fence, OtherFence: top,
				Detail: fmt.Sprintf("fence %d minted after fence %d (coordinator incarnation %d)", g.Fence, top, g.Incarnation+1)})
			continue
		}
		top = g.Fence
	}
}

// refusals counts the gate's refusals that neither an overlap nor a fence
// reused after a restart that lost the counter explains.
func (j *judgement) refusals() {
	gens := j.gens
	byFloor := make(map[floorKey][]int32, len(gens))
	for i := range gens {
		g := &gens[i]
		k := floorKey{g.Resource, g.Fence, g.Agent}
		byFloor[k] = append(byFloor[k], int32(i))
	}
	nth := make([]int, len(j.h.Resources))
	for k := range j.rd.writes {
		w := &j.rd.writes[k]
		if !w.Refused {
			continue
		}
		nth[w.Resource]++
		if explained(gens, byFloor, w) {
			continue
		}
		j.r.UnexplainedRefusals++
		j.cx.add(Counterexample{Kind: UnexplainedRefusal, AtMS: ms(w.At), Resource: j.resource(w.Resource),
			Holder: j.agent(w.Agent), Fence: w.Fence, Other: j.agent(w.FloorAgent), OtherFence: w.FloorFence,
			Detail: fmt.Sprintf("refusal #%d at %s has no overlap or fence reuse behind it", nth[w.Resource], j.resource(w.Resource))})
	}
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

// forgeries counts what the forgers did, resource by resource, as the
// Reader folded it.
func (j *judgement) forgeries() {
	for i := range j.per {
		f := j.rd.Forgeries(i)
		j.r.ForgeriesRefused += f.Refused
		j.r.ForgeriesLanded += f.Landed
		j.r.ForgedFloorsMoved += f.FloorsMoved
	}
}

// violations names the invariants the fenced mode promises under the
// header's assumptions and r shows broken.
func (c *Checker) violations(r *Report) []string {
	var v []string
	if r.StaleWritesLanded > 0 {
		v = append(v, Plural(r.StaleWritesLanded, "stale write", "stale writes")+" landed through the gate")
	}
	if r.ContainmentBreaches > 0 && c.h.Clocks.WithinBudget {
		v = append(v, Plural(r.ContainmentBreaches, "containment breach", "containment breaches")+" with drift inside the skew budget")
	}
	if r.FenceReuses > 0 && !c.lostCounter {
		v = append(v, Plural(r.FenceReuses, "fence", "fences")+" reused with no restart that lost the counter")
	}
	if r.UnexplainedRefusals > 0 {
		v = append(v, Plural(r.UnexplainedRefusals, "refusal with no overlap behind it", "refusals with no overlap behind them"))
	}
	if r.ForgeriesLanded > 0 {
		v = append(v, Plural(r.ForgeriesLanded, "forged write", "forged writes")+" landed through the gate")
	}
	if r.ForgedFloorsMoved > 0 {
		v = append(v, Plural(r.ForgedFloorsMoved, "floor", "floors")+" moved by a forger")
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
