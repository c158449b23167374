package harness

import (
	"fmt"
	"slices"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// checkInput is everything the checker may read: the lease generations and
// the true instants their holders believed and acted in, the writes as each
// resource recorded them, and (to match each refusal to its cause) the
// gates' refusal logs. It never asks a gate whether a write was safe.
type checkInput struct {
	sc         *Scenario
	mode       Mode
	leases     []leaseRec
	writes     []writeRec
	rejections [][]leasefence.Rejection // per resource; nil in naive mode
	agentName  func(int32) string
	resName    func(int32) string
}

// recWrites summarises one lease generation's writes.
type recWrites struct {
	firstLanded, lastLanded time.Duration
	landed, refused         int
}

// check is the independent safety checker.
func check(in checkInput) *Report {
	r := &Report{Mode: in.mode}
	cx := counterexamples{}
	per := make([]ResourceReport, in.sc.Resources)
	for i := range per {
		per[i].Resource = in.resName(int32(i))
	}

	// (a) Stale writes: a write that landed after a higher fence's write.
	maxLanded := make([]leasefence.Fence, in.sc.Resources)
	maxBy := make([]int32, in.sc.Resources)
	byRec := make([]recWrites, len(in.leases))
	for _, w := range in.writes {
		p := &per[w.resource]
		if w.refused {
			p.CommitsRefused++
			r.CommitsRefused++
			if w.rec >= 0 {
				byRec[w.rec].refused++
			}
			continue
		}
		p.CommitsAdmitted++
		r.CommitsAdmitted++
		if w.rec >= 0 {
			rw := &byRec[w.rec]
			if rw.landed == 0 {
				rw.firstLanded = w.at
			}
			rw.lastLanded = w.at
			rw.landed++
		}
		if w.fence < maxLanded[w.resource] {
			p.StaleWritesLanded++
			r.StaleWritesLanded++
			cx.add(Counterexample{Kind: StaleWrite, AtMS: ms(w.at), Resource: in.resName(w.resource),
				Holder: in.agentName(w.agent), Fence: w.fence,
				Other: in.agentName(maxBy[w.resource]), OtherFence: maxLanded[w.resource],
				Detail: fmt.Sprintf("fence %d landed after fence %d had landed, with no error", w.fence, maxLanded[w.resource])})
			continue
		}
		maxLanded[w.resource], maxBy[w.resource] = w.fence, w.agent
	}
	for i := range per {
		per[i].FloorFence = maxLanded[i]
		if maxLanded[i] > 0 {
			per[i].FloorHolder = in.agentName(maxBy[i])
		}
	}

	// (b) Overlaps: two holders acting as holder of one resource at one true
	// instant, from completing the acquire to the later of their believed
	// deadline and their last write.
	byRes := make([][]int32, in.sc.Resources)
	for i := range in.leases {
		if in.leases[i].start >= 0 {
			byRes[in.leases[i].resource] = append(byRes[in.leases[i].resource], int32(i))
		}
	}
	actEnd := func(l *leaseRec) time.Duration { return max(l.beliefEnd, l.actEnd) }
	for ri, ids := range byRes {
		slices.SortStableFunc(ids, func(a, b int32) int { return int(in.leases[a].start - in.leases[b].start) })
		for x, i := range ids {
			li := &in.leases[i]
			for _, j := range ids[x+1:] {
				lj := &in.leases[j]
				if lj.start >= actEnd(li) {
					break
				}
				if lj.agent == li.agent {
					continue
				}
				older, newer := i, j // mint order
				if older > newer {
					older, newer = newer, older
				}
				lo, ln := &in.leases[older], &in.leases[newer]
				wo, wn := byRec[older], byRec[newer]
				r.Overlaps++
				per[ri].Overlaps++
				at := max(li.start, lj.start)
				switch {
				case wo.landed > 0 && wn.landed > 0 && wo.lastLanded > wn.firstLanded:
					r.SilentOverlaps++
					per[ri].SilentOverlaps++
					cx.add(Counterexample{Kind: SilentOverlap, AtMS: ms(at), Resource: in.resName(int32(ri)),
						Holder: in.agentName(lo.agent), Fence: lo.fence, Other: in.agentName(ln.agent), OtherFence: ln.fence,
						Detail: fmt.Sprintf("both believed they held it; %s@%d wrote at %.3fms after %s@%d had written at %.3fms",
							in.agentName(lo.agent), lo.fence, ms(wo.lastLanded), in.agentName(ln.agent), ln.fence, ms(wn.firstLanded))})
				case wo.refused > 0 || wn.refused > 0:
					r.RefusedOverlaps++
					cx.add(Counterexample{Kind: RefusedWrite, AtMS: ms(at), Resource: in.resName(int32(ri)),
						Holder: in.agentName(lo.agent), Fence: lo.fence, Other: in.agentName(ln.agent), OtherFence: ln.fence,
						Detail: "both believed they held it; the gate refused the stale write and logged both"})
				}
			}
		}
	}

	// (c) Containment: a holder believing its lease valid after the
	// coordinator had expired it.
	for i := range in.leases {
		l := &in.leases[i]
		if l.start < 0 || l.beliefEnd <= l.coordEnd {
			continue
		}
		r.ContainmentBreaches++
		cx.add(Counterexample{Kind: ContainmentBreach, AtMS: ms(l.coordEnd), Resource: in.resName(l.resource),
			Holder: in.agentName(l.agent), Fence: l.fence,
			Detail: fmt.Sprintf("believed valid until %.3fms; the coordinator let it go at %.3fms (%.3fms earlier)",
				ms(l.beliefEnd), ms(l.coordEnd), ms(l.beliefEnd-l.coordEnd))})
	}

	// (d) Fences strictly increase in mint order, across restarts.
	var top leasefence.Fence
	for i := range in.leases {
		l := &in.leases[i]
		if l.fence <= top {
			r.FenceReuses++
			cx.add(Counterexample{Kind: FenceReuse, AtMS: ms(l.granted), Resource: in.resName(l.resource),
				Holder: in.agentName(l.agent), Fence: l.fence, OtherFence: top,
				Detail: fmt.Sprintf("fence %d minted after fence %d (coordinator incarnation %d)", l.fence, top, l.epoch+1)})
			continue
		}
		top = l.fence
	}
	r.FencesMinted = len(in.leases)

	// (e) Every refusal in a gate's log matches a refused write at the
	// resource and is explained by an overlap or by a fence reused after a
	// restart that lost the counter.
	if in.rejections != nil {
		refusedAt := make([][]writeRec, in.sc.Resources)
		for _, w := range in.writes {
			if w.refused {
				refusedAt[w.resource] = append(refusedAt[w.resource], w)
			}
		}
		gens := make(map[genKey][]int32, len(in.leases))
		for i := range in.leases {
			l := &in.leases[i]
			k := genKey{l.resource, l.fence, in.agentName(l.agent)}
			gens[k] = append(gens[k], int32(i))
		}
		for ri, log := range in.rejections {
			for k, rej := range log {
				var w *writeRec
				if k < len(refusedAt[ri]) {
					w = &refusedAt[ri][k]
				}
				if w == nil || in.agentName(w.agent) != rej.Holder || w.fence != rej.Fence || !explained(in, gens, w, rej, actEnd) {
					r.UnexplainedRefusals++
					at := time.Duration(-1)
					if w != nil {
						at = w.at
					}
					cx.add(Counterexample{Kind: UnexplainedRefusal, AtMS: ms(at), Resource: rej.Resource,
						Holder: rej.Holder, Fence: rej.Fence, Other: rej.FloorHolder, OtherFence: rej.FloorFence,
						Detail: fmt.Sprintf("refusal #%d has no overlap or fence reuse behind it", rej.Seq)})
				}
			}
			if len(log) != len(refusedAt[ri]) {
				r.UnexplainedRefusals += abs(len(refusedAt[ri]) - len(log))
			}
		}
	}

	r.PerResource = per
	r.Counterexamples = cx.list()
	if in.mode == Fenced {
		r.Violations = violations(in.sc, r)
	}
	return r
}

// explained reports whether a refusal had a cause: the refused holder acted
// on the resource while the floor's lease was live at the coordinator or its
// holder acted on it (counted from when the coordinator minted it, since a
// push can raise the floor before its holder hears of the grant), the floor is the refused
// holder's own newer lease, or the refused fence was reissued by a
// coordinator that restarted without its counter.
func explained(in checkInput, gens map[genKey][]int32, w *writeRec, rej leasefence.Rejection, actEnd func(*leaseRec) time.Duration) bool {
	if w.rec < 0 {
		return false
	}
	refused := &in.leases[w.rec]
	for _, i := range gens[genKey{w.resource, rej.FloorFence, rej.FloorHolder}] {
		f := &in.leases[i]
		if f.granted > w.at {
			continue
		}
		switch {
		case f.agent == refused.agent && f.fence > refused.fence:
			return true
		case f.epoch < refused.epoch:
			return true // refused fence reissued after a restart that lost the counter
		case refused.start <= max(actEnd(f), f.coordEnd):
			return true // the floor's lease was live, or its holder acting, while the refused holder acted
		}
	}
	return false
}

// genKey finds the lease generations a gate's floor may name.
type genKey struct {
	resource int32
	fence    leasefence.Fence
	holder   string
}

// violations names the invariants the fenced mode promises under sc's
// assumptions and r shows broken.
func violations(sc *Scenario, r *Report) []string {
	var v []string
	if r.StaleWritesLanded > 0 {
		v = append(v, fmt.Sprintf("%d stale writes landed through the gate", r.StaleWritesLanded))
	}
	if r.ContainmentBreaches > 0 && sc.DriftWithinBudget() {
		v = append(v, fmt.Sprintf("%d containment breaches with drift inside the skew budget", r.ContainmentBreaches))
	}
	lostCounter := false
	for _, rs := range sc.Restarts {
		lostCounter = lostCounter || !rs.Persist
	}
	for _, iv := range sc.Interventions {
		lostCounter = lostCounter || iv.Kind == RestartCoordinator && !iv.Persist
	}
	if r.FenceReuses > 0 && !lostCounter {
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

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// Report runs the independent checker over the history so far.
func (s *Sim) Report() *Report {
	in := checkInput{
		sc: &s.sc, mode: s.mode, leases: s.hist.leases, writes: s.hist.writes,
		agentName: func(i int32) string {
			if i < 0 {
				return ""
			}
			return s.agents[i].name
		},
		resName: func(i int32) string { return s.resources[i].name },
	}
	if s.mode == Fenced {
		in.rejections = make([][]leasefence.Rejection, len(s.resources))
		for i := range s.resources {
			in.rejections[i] = s.resources[i].gate.Rejections()
		}
	}
	r := check(in)
	r.Digest = s.Digest()
	r.Events = s.events
	r.Acquisitions = s.live.Acquisitions
	r.Renewals = s.live.Renewals
	r.Expiries = s.live.Expiries
	r.Denials = s.hist.denials
	r.Retries = s.hist.retries
	r.MessagesLost = s.live.MessagesLost
	r.ChecksFailed = s.hist.checksFailed
	r.PushesApplied = s.hist.pushes
	for i := range s.hist.leases {
		if s.hist.leases[i].released {
			r.Releases++
		}
	}
	return r
}
