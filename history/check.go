package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
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
	writesFailed, faults                                int
	// The library errors and the events Add could not read: the first
	// MaxCounterexamples of each, and how many in all.
	libraryErrors   []string
	nLibraryErrors  int
	firstUnreadable string
	nUnreadable     int
	rules           ruleState
	writes          writeCounts
	exclusion       *exclusion
	idle            *idleWaits
	coverage        *coverage
	faultLog        faultLog
}

// writeCounts are the writes at each resource as they were folded in:
// admitted, refused, stale (landed after a write of a newer generation),
// and landed under a reissued fence, with the first stale writes.
type writeCounts struct {
	per                                []ResourceReport // counters only: the names and floors are put in by Report
	admitted, refused, stale, reissued int
	lapsed, leaseRefused               int
	cx                                 counterexamples
}

// NewChecker returns a Checker for the mode events of a history with
// header h.
func NewChecker(h *Header, mode Mode) *Checker {
	return &Checker{h: h, mode: mode, read: NewReader(h), digest: newDigest(), rules: newRuleState(h), exclusion: newExclusion(h),
		idle: newIdleWaits(len(h.Resources)), coverage: newCoverage(h),
		writes: writeCounts{per: make([]ResourceReport, len(h.Resources))}}
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
		if c.nUnreadable == 0 {
			c.firstUnreadable = err.Error()
		}
		c.nUnreadable++
		return
	}
	c.rule(e)
	c.exclusion.add(e)
	c.idle.add(e)
	c.coverage.add(e, c.read)
	c.faultLog.add(e)
	switch e.Kind {
	case CommitAdmitted, WriteLanded, CommitRefused:
		c.wrote(c.read.LastWrite())
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
	case FaultBegan:
		if e.Outcome != OutcomeNotPlayed {
			c.faults++
		}
	case LibraryError:
		if c.nLibraryErrors < MaxCounterexamples {
			c.libraryErrors = append(c.libraryErrors, e.Detail)
		}
		c.nLibraryErrors++
	}
}

// wrote counts write w, which the Reader has just judged.
func (c *Checker) wrote(w *Write) {
	n := &c.writes
	p := &n.per[w.Resource]
	if w.Refused {
		p.CommitsRefused++
		n.refused++
		if w.LeaseNotLive {
			n.leaseRefused++
		}
		return
	}
	if w.Lapsed {
		n.lapsed++
	}
	p.CommitsAdmitted++
	n.admitted++
	if w.Reissued {
		p.ReissuedWritesLanded++
		n.reissued++
	}
	if w.Stale {
		p.StaleWritesLanded++
		n.stale++
		n.cx.add(Counterexample{Kind: StaleWrite, AtMS: ms(w.At), Resource: c.resourceName(w.Resource),
			Holder: c.agentName(w.Agent), Fence: w.Fence, Other: c.agentName(w.FloorAgent), OtherFence: w.FloorFence,
			Detail: staleDetail(w, c.h.FenceWord(c.mode))})
	}
}

// Check judges a whole history: each mode of the header, on its own
// events.
func Check(h Header, events []Event) *Result {
	c := NewCheckers(h)
	for i := range events {
		c.Add(&events[i])
	}
	return c.Result()
}

// Checkers judges a whole history as it is told it, event by event: a
// Checker for each mode of the header, each on its own events (an event of
// a mode the header does not list is ignored). It keeps no event, so a
// history of any length is judged in memory in proportion to its agents,
// resources and lease generations; as a Subscriber it can hear a run or a
// Decoder's Replay.
type Checkers struct {
	h     *Header
	modes map[Mode]*Checker
}

// NewCheckers returns the Checkers of a history with header h.
func NewCheckers(h Header) *Checkers {
	c := &Checkers{h: &h, modes: make(map[Mode]*Checker, len(h.Modes))}
	for _, m := range h.Modes {
		c.modes[m] = NewChecker(c.h, m)
	}
	return c
}

// Add takes the next event of the history.
func (c *Checkers) Add(e *Event) {
	if m, ok := c.modes[e.Mode]; ok {
		m.Add(e)
	}
}

// Event implements Subscriber.
func (c *Checkers) Event(e Event) { c.Add(&e) }

// Result judges the history so far, each mode of the header.
func (c *Checkers) Result() *Result {
	res := NewResult(c.h)
	for _, m := range c.h.Modes {
		res.Add(c.modes[m].Report())
	}
	return res
}

// LibraryErrorViolation begins the violation of a LibraryError event.
const LibraryErrorViolation = "the library returned an error: "

// Report judges the history so far. It leaves the checker as it was, so
// it can be called at any point of the history, as often as needed.
func (c *Checker) Report() *Report {
	j := c.newJudgement()
	j.writes()
	j.overlaps()
	j.containment()
	j.rules()
	r := j.r
	r.Vacuous = r.CommitsAdmitted+r.CommitsRefused+r.WritesFailed == 0
	r.NotExercised = c.notExercised(r)
	r.PerResource = j.per
	r.Counterexamples, r.MoreCounterexamples = j.cx.list()
	j.forgeries()
	var vs []violation
	if c.h.Fenced(c.mode) {
		vs = c.violations(r)
	}
	if r.MutualExclusionViolations > 0 {
		// The lock's own safety, whatever the discipline: no fence makes
		// a lock that grants twice a correct lock.
		vs = append(vs, violation{Plural(r.MutualExclusionViolations, "mutual-exclusion violation", "mutual-exclusion violations") +
			ExclusionViolation, false})
	}
	if r.UnexplainedLandings > 0 {
		vs = append(vs, violation{Plural(r.UnexplainedLandings, "write", "writes") + UnexplainedLandingViolation, true})
	}
	if _, na := c.h.NotExpressible(c.mode, RuleReleaseAfterEnd); r.UnexplainedReleases > 0 && !na {
		vs = append(vs, violation{c.releaseViolation(r.UnexplainedReleases), false})
	}
	if r.RenewalsAfterEnd > 0 {
		vs = append(vs, violation{Plural(r.RenewalsAfterEnd, "renewal", "renewals") + RenewContractViolation, false})
	}
	if r.NotHeldUnmatched > 0 {
		vs = append(vs, violation{Plural(r.NotHeldUnmatched, "answer", "answers") + NotHeldViolation, false})
	}
	for _, d := range c.libraryErrors {
		vs = append(vs, violation{LibraryErrorViolation + d, false})
	}
	if more := c.nLibraryErrors - len(c.libraryErrors); more > 0 {
		vs = append(vs, violation{fmt.Sprintf("%sand %d more", LibraryErrorViolation, more), false})
	}
	if n := c.nUnreadable; n > 0 {
		vs = append(vs, violation{fmt.Sprintf("%s%s (the first: %s)",
			Plural(n, "event", "events"), UnreadableViolation, c.firstUnreadable), false})
	}
	var lock, writes []string
	for _, v := range vs {
		r.Violations = append(r.Violations, v.text)
		if v.writes {
			writes = append(writes, v.text)
		} else {
			lock = append(lock, v.text)
		}
	}
	r.Findings = c.findings(r, lock, writes)
	return r
}

// RenewContractViolation follows the count of the renewals the lock
// answered OK though sent after their lease had ended.
const RenewContractViolation = " sent after the lease had ended answered OK (the lease contract: Renew of a lease " +
	"no longer live returns an error matching ErrNotHeld)"

// NotHeldViolation follows the count of a contender lock's answers to
// Renew or Release of a lease that had ended that were errors not
// matching ErrNotHeld.
const NotHeldViolation = " to Renew or Release of a lease that had ended were errors that do not match ErrNotHeld (the lease contract: " +
	"such an error matches ErrNotHeld with errors.Is; wrap the lock's own with it)"

// ReleaseContractViolation follows the count of the releases a contender's
// lock answered nil for a lease the record shows no longer live: the Lease
// contract is an error matching ErrNotHeld (realtime.Lease).
const ReleaseContractViolation = " answered nil for a lease no longer live (the lease contract: Release of a lease " +
	"no longer live returns an error matching ErrNotHeld)"

// releaseViolation names n releases of leases no longer live: a lock run
// in place of the lab's coordinator broke its lease contract; the lab's
// own coordinator granted what it should have refused.
func (c *Checker) releaseViolation(n int) string {
	if c.h.Contender(c.mode).Generations != "" {
		return Plural(n, "release", "releases") + ReleaseContractViolation
	}
	return Plural(n, "release", "releases") + " granted by the coordinator of a lease no longer live"
}

// ExclusionViolation follows the count of the mutual-exclusion
// violations in their violation.
const ExclusionViolation = ": the lock granted a resource while an earlier lease on it still ran"

// What a run can leave unexercised, as Report.NotExercised names it.
const (
	NotExercisedExclusion   = "mutual exclusion (no takeover: no resource was granted while an earlier lease on it was unreleased)"
	NotExercisedGate        = "the gate (no overlap and no refusal: no write could be stale)"
	NotExercisedContainment = "containment (no lease expired: no holder could believe in one past its expiry)"
)

// notExercised names the properties of the mode that r shows the run never
// put to the test.
func (c *Checker) notExercised(r *Report) []string {
	var out []string
	if r.Takeovers == 0 {
		out = append(out, NotExercisedExclusion)
	}
	if c.h.Fenced(c.mode) {
		if r.Overlaps == 0 && r.CommitsRefused == 0 {
			out = append(out, NotExercisedGate)
		}
		if r.Expiries == 0 {
			out = append(out, NotExercisedContainment)
		}
	}
	return out
}

// FailoverReuseViolation follows the count of the fences reused after the
// coordinator's store failed over: a loss of the store's, not a lie of the
// library's.
const FailoverReuseViolation = " reused after the coordinator's store failed over to a replica that had not seen them"

// UnexplainedLandingViolation follows the count of the landings no lease
// of the history explains in their violation.
const UnexplainedLandingViolation = " landed under no lease the history granted the writer on that resource"

// UnreadableViolation follows the count of the events the checker could
// not read in their violation.
const UnreadableViolation = " the checker could not read"

// judgement is one Report in the making: the Reader's view of the history,
// and the counters and counterexamples each part of the verdict adds to.
type judgement struct {
	c   *Checker
	h   *Header
	rd  *Reader
	r   *Report
	per []ResourceReport
	cx  counterexamples
}

func (c *Checker) newJudgement() *judgement {
	h := c.h
	j := &judgement{c: c, h: h, rd: c.read, per: slices.Clone(c.writes.per)}
	j.r = &Report{
		Mode: c.mode, Contender: h.Contender(c.mode), Digest: c.digest.String(), Events: c.events,
		Acquisitions: c.acquisitions, Renewals: c.renewals, Denials: c.denials, Expiries: c.expiries,
		Releases: c.releases, FencesMinted: c.minted, Retries: c.retries, MessagesLost: c.lost,
		ChecksFailed: c.checksFailed, PushesApplied: c.pushes, WritesFailed: c.writesFailed, FaultsPlayed: c.faults,
		IdleWhileWaitingMS: int(c.idle.idle().Milliseconds()), FaultsOnServers: slices.Clone(c.faultLog.list),
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

// writes puts in the writes the checker counted as they came, and each
// resource's floor.
func (j *judgement) writes() {
	n := &j.c.writes
	j.r.CommitsAdmitted, j.r.CommitsRefused = n.admitted, n.refused
	j.r.StaleWritesLanded, j.r.ReissuedWritesLanded = n.stale, n.reissued
	j.r.LapsedWritesLanded, j.r.LeaseRefusals = n.lapsed, n.leaseRefused
	j.cx.merge(&n.cx)
	for i := range j.per {
		f, by := j.rd.Floor(i)
		j.per[i].FloorFence = f
		if f > 0 {
			j.per[i].FloorHolder = j.agent(by)
		}
	}
}

func staleDetail(w *Write, fence string) string {
	if w.Fence >= w.FloorFence {
		return fmt.Sprintf("%s %d landed after %s %d of a newer lease generation had landed, with no error", fence, w.Fence, fence, w.FloorFence)
	}
	return fmt.Sprintf("%s %d landed after %s %d had landed, with no error", fence, w.Fence, fence, w.FloorFence)
}

// overlaps counts pairs of holders acting as holder of one resource at one
// true instant, from completing the acquire to the later of their believed
// deadline and their last write.
//
// It goes resource by resource, along each resource's chain of
// generations, so that it needs 16 bytes for each believed generation of
// one resource while it runs, and nothing after: each generation's sort
// key beside its index, so that sorting reads neither the generations'
// records nor calls back into the Reader. It grows with the busiest
// resource's generations, not with all of the run's: a long run over many
// resources needs a fraction of what one sort of them all would.
func (j *judgement) overlaps() {
	rd := j.rd
	type key struct {
		start time.Duration
		id    int32 // mint order: ties on start keep it
	}
	var keys []key // one resource's believed generations, by start, then in mint order
	for ri := range j.per {
		keys = keys[:0]
		for i := rd.Latest(ri); i >= 0; i = rd.Generation(i).prev {
			if g := rd.Generation(i); g.Believed() {
				keys = append(keys, key{start: g.Start, id: i})
			}
		}
		slices.SortFunc(keys, func(a, b key) int {
			if a.start != b.start {
				return cmp.Compare(a.start, b.start)
			}
			return cmp.Compare(a.id, b.id)
		})
		for x, ki := range keys {
			li := rd.Generation(ki.id)
			for _, kk := range keys[x+1:] {
				if kk.start >= li.Acting() {
					break
				}
				if lk := rd.Generation(kk.id); lk.Agent != li.Agent {
					j.overlap(li.Resource, ki.id, kk.id)
				}
			}
		}
	}
}

// overlap records that generations a and b of resource ri overlapped.
func (j *judgement) overlap(ri, a, b int32) {
	older, newer := min(a, b), max(a, b) // mint order
	lo, ln := j.rd.Generation(older), j.rd.Generation(newer)
	j.r.Overlaps++
	j.per[ri].Overlaps++
	at := max(lo.Start, ln.Start)
	switch {
	case lo.landed && ln.landed && lo.lastLanded > ln.firstLanded:
		j.r.SilentOverlaps++
		j.per[ri].SilentOverlaps++
		j.cx.add(Counterexample{Kind: SilentOverlap, AtMS: ms(at), Resource: j.resource(ri),
			Holder: j.agent(lo.Agent), Fence: lo.Fence, Other: j.agent(ln.Agent), OtherFence: ln.Fence,
			Detail: fmt.Sprintf("both believed they held it; %s@%d wrote at %s after %s@%d had written at %s",
				j.agent(lo.Agent), lo.Fence, FormatDuration(lo.lastLanded), j.agent(ln.Agent), ln.Fence, FormatDuration(ln.firstLanded))})
	case lo.refused || ln.refused:
		j.r.RefusedOverlaps++
		detail := "both believed they held it; the gate refused the stale write and logged both"
		if !lo.refused {
			// Only the newer holder was refused: no stale write was. Newer
			// by its grant, which is what a reader takes for a bug; say
			// what makes the refusal right.
			detail = fmt.Sprintf("both believed they held it; the gate refused %s@%d, the newer lease (granted after %s@%d's), "+
				"as it refuses any fence below the highest it admitted: a later holder's, or one from before a restart that lost the counter "+
				"(a refusal with neither counts as unexplained)", j.agent(ln.Agent), ln.Fence, j.agent(lo.Agent), lo.Fence)
		}
		j.cx.add(Counterexample{Kind: RefusedWrite, AtMS: ms(at), Resource: j.resource(ri),
			Holder: j.agent(lo.Agent), Fence: lo.Fence, Other: j.agent(ln.Agent), OtherFence: ln.Fence,
			Detail: detail})
	}
}

// containment counts holders believing their lease valid after the
// coordinator had let it go.
func (j *judgement) containment() {
	for i := range int32(j.rd.GenerationCount()) {
		g := j.rd.Generation(i)
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

// rules puts in what the rules judged as the events came.
func (j *judgement) rules() {
	s := &j.c.rules
	j.r.FenceReuses = s.fenceReuses
	j.r.FailoverFenceReuses, j.r.UnexcusedFenceReuses = s.failoverReuses()
	j.r.UnexplainedRefusals = s.unexplainedRefusals
	j.r.UnexplainedLandings = s.unexplainedLandings
	j.r.UnexplainedReleases = s.unexplainedReleases
	j.r.RefusedWritesLanded = s.refusedLanded
	j.r.AdmittedBelowPush = s.belowPush
	j.r.AdmittedBelowOwnFloor = s.belowOwnFloor
	j.cx.merge(&s.cx)
	j.r.RenewalsAfterEnd = j.c.coverage.renewedLate
	j.r.NotHeldUnmatched = j.c.coverage.unmatched
	for _, e := range append(slices.Clone(j.c.coverage.renewedLateCx), j.c.coverage.unmatchedCx...) {
		j.cx.add(e)
	}
	x := j.c.exclusion
	j.r.MutualExclusionViolations = x.n
	j.r.Takeovers = x.takeovers
	for _, e := range x.cx {
		j.cx.add(e)
	}
	if more := x.n - len(x.cx); more > 0 {
		j.cx.addMore(MutualExclusionViolation, more)
	}
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

// violation is one sentence of Report.Violations, and whether it is the
// write path's (the gate's: a stale or forged write through it, a refusal
// or an admission the record does not bear out) rather than the lock's.
type violation struct {
	text   string
	writes bool
}

// violations names the invariants the fenced mode promises under the
// header's assumptions and r shows broken, each the write path's or the
// lock's.
func (c *Checker) violations(r *Report) (v []violation) {
	if r.StaleWritesLanded > 0 {
		v = append(v, violation{Plural(r.StaleWritesLanded, "stale write", "stale writes") + " landed through the gate", true})
	}
	if r.ContainmentBreaches > 0 && c.h.Clocks.WithinBudget {
		v = append(v, violation{Plural(r.ContainmentBreaches, "containment breach", "containment breaches") + " with drift inside the skew budget", false})
	}
	if r.UnexcusedFenceReuses > 0 {
		v = append(v, violation{Plural(r.UnexcusedFenceReuses, "fence", "fences") + " reused with no restart that lost the counter between the two mints", false})
	}
	if r.FailoverFenceReuses > 0 {
		v = append(v, violation{Plural(r.FailoverFenceReuses, "fence", "fences") + FailoverReuseViolation, false})
	}
	if r.UnexplainedRefusals > 0 {
		v = append(v, violation{Plural(r.UnexplainedRefusals, "refusal", "refusals") + " whose floor the history does not bear out", true})
	}
	if r.RefusedWritesLanded > 0 {
		v = append(v, violation{Plural(r.RefusedWritesLanded, "write", "writes") + " reported refused landed", true})
	}
	if r.AdmittedBelowPush > 0 {
		v = append(v, violation{Plural(r.AdmittedBelowPush, "commit", "commits") + " admitted below a fence pushed to the gate", true})
	}
	if r.AdmittedBelowOwnFloor > 0 {
		v = append(v, violation{Plural(r.AdmittedBelowOwnFloor, "commit", "commits") + " admitted below a fence the same gate had admitted", true})
	}
	if r.ForgeriesLanded > 0 {
		v = append(v, violation{Plural(r.ForgeriesLanded, "forged write", "forged writes") + " landed through the gate", true})
	}
	if r.ForgedFloorsMoved > 0 {
		v = append(v, violation{Plural(r.ForgedFloorsMoved, "floor", "floors") + " moved by a forger", true})
	}
	return v
}

// counterexamples keeps the first MaxCounterexamples of each kind, and
// counts the rest.
type counterexamples struct {
	byKind map[CounterexampleKind][]Counterexample
	more   map[CounterexampleKind]int // past the first MaxCounterexamples
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
		return
	}
	if c.more == nil {
		c.more = make(map[CounterexampleKind]int)
	}
	c.more[x.Kind]++
}

// merge adds every counterexample from, kept or counted, after c's oln.
func (c *counterexamples) merge(from *counterexamples) {
	for _, k := range from.order {
		for _, x := range from.byKind[k] {
			c.add(x)
		}
		c.addMore(k, from.more[k])
	}
}

// addMore counts n more counterexamples of kind k, none of them kept.
func (c *counterexamples) addMore(k CounterexampleKind, n int) {
	if n <= 0 {
		return
	}
	if c.more == nil {
		c.more = make(map[CounterexampleKind]int)
	}
	c.more[k] += n
}

// list returns the counterexamples kept, kind by kind in the order each
// kind was first seen, and how many of each kind were left out (nil for
// none).
func (c *counterexamples) list() ([]Counterexample, map[CounterexampleKind]int) {
	out := []Counterexample{}
	for _, k := range c.order {
		out = append(out, c.byKind[k]...)
	}
	if len(c.more) == 0 {
		return out, nil
	}
	return out, maps.Clone(c.more)
}
