package realtime

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// The coordinator's side of a real-time run: what the history records of
// the coordinator as the agents' calls pass it (grants, extensions, ends
// of leases), its clock, and its pushes to the gates.

// genState is the newest lease generation of a resource, as the history
// knows it.
type genState struct {
	known       bool
	ended       bool // released, or known expired
	agent       int
	fence       leasefence.Fence
	incarnation int32
	coordEnd    time.Duration
	guessed     GuessedEnds
	// released is the release that ended this generation, if one did:
	// the index of its event in the mode's emitted events (-1: none), and
	// the instant its call reached the coordinator. The next grant may be
	// recorded after it, yet stamped before its answer came back.
	released      int
	releaseCalled time.Duration
}

// GuessedEnds are the last lease generations of one resource that a
// history took for expired when the next was granted, having seen no
// release of them. It holds the one rule by which both ways of running
// agents (goroutines, whose coordinator side records as it goes, and
// processes, whose parent makes the coordinator's side from what the
// children saw) date an end of a lease that no call revealed: at the next
// grant (Grant), at a refusal for lock-delay (RefusalEnds), and as a
// release whose answer came back after that grant (Released). Its zero
// value is ready to use.
type GuessedEnds struct {
	ends []guessedEnd
}

// Newest is a resource's newest lease generation, as a history has it.
type Newest struct {
	Known bool // the history has granted the resource
	// Ended: the history has its end (a release, an expiry, or the
	// restart that forgot it).
	Ended       bool
	Agent       int
	Fence       leasefence.Fence
	Incarnation int32
	Deadline    time.Duration // its expiry at the coordinator, in true time
}

// expiry is the Expired event that ends n on resource ri.
func (n Newest) expiry(ri int) history.Event {
	return history.Event{Kind: history.Expired, Agent: n.Agent, Resource: ri, Fence: n.Fence, Incarnation: n.Incarnation,
		Other: -1, Deadline: n.Deadline}
}

// Grant is the rule for a grant of generation f in mode m of h, recorded
// at instant at, on resource ri whose newest generation is n. It reports
// whether the grant took the resource over, becoming its newest
// generation. A grant the lock made before n and the lab recorded late
// (Header.LateGrant) took over nothing: n is still the newest, and no end
// of it is written, none being in the record (the checker judges the late
// lease against n). A grant that took over from n, not ended, proves n
// expired there, unrenewed (a release would be known, unless its answer
// is still on its way: Released judges it): end is that expiry, dated at,
// which the caller writes as events[event] of the history being made (-1:
// it is not written), and expired reports it.
func (g *GuessedEnds) Grant(h *history.Header, m history.Mode, ri int, n Newest, f leasefence.Fence, at time.Duration, event int) (takeover bool, end history.Event, expired bool) {
	if n.Known && h.LateGrant(m, f, n.Fence) {
		return false, end, false
	}
	if !n.Known || n.Ended {
		return true, end, false
	}
	g.guess(n.Fence, n.Incarnation, at, event)
	end = n.expiry(ri)
	end.At, end.Mode = at, m
	return true, end, true
}

// RefusalEnds is the rule for an acquire of resource ri the coordinator
// refused for reason, while n is the resource's newest generation: a
// refusal for lock-delay says no lease holds the resource, the last one
// having expired unreleased. So n, if the history has not ended it, ended
// so, by the time the refusal was made: else the resource would seem held
// until the next grant, and its idle time under the delay (history's
// idle_while_waiting_ms) would be lost. It returns that expiry, for the
// caller to date, and whether the refusal ended n.
func RefusalEnds(reason leasefence.Reason, ri int, n Newest) (history.Event, bool) {
	if reason != leasefence.ReasonLockDelay || !n.Known || n.Ended {
		return history.Event{}, false
	}
	return n.expiry(ri), true
}

// maxGuessed is how many generations taken for expired a resource keeps:
// a release's answer held up across more grants than that is judged as
// the coordinator's claim.
const maxGuessed = 4

// guessedEnd is a generation taken for expired when the next was granted.
type guessedEnd struct {
	fence       leasefence.Fence
	incarnation int32
	replacedAt  time.Duration
	event       int // the index of its expired event in the history being made, or -1
}

// guess records that generation (f, incarnation) was taken for expired at
// the grant of the next, at instant replacedAt; its expired event is
// events[event] of the history being made (-1: none).
func (g *GuessedEnds) guess(f leasefence.Fence, incarnation int32, replacedAt time.Duration, event int) {
	g.ends = append(g.ends, guessedEnd{fence: f, incarnation: incarnation, replacedAt: replacedAt, event: event})
	g.ends = g.ends[max(0, len(g.ends)-maxGuessed):]
}

// Released judges a release the coordinator answered OK for generation
// (f, incarnation), which the history does not have as the resource's
// live one, that reached the coordinator at instant arrived. If the
// generation is one taken for expired at a grant no earlier than arrived,
// the release is what let it go, its answer still on its way: its guessed
// expiry in events becomes the release (LetGo), and Released reports
// true. Otherwise it reports false, and the release is the coordinator's
// claim for the checker to judge: a correct coordinator refuses the
// release of a generation that is not its live one.
func (g *GuessedEnds) Released(events []history.Event, f leasefence.Fence, incarnation int32, arrived time.Duration) bool {
	for _, ge := range g.ends {
		if ge.fence == f && ge.incarnation == incarnation && LetGo(events, ge.event, f, arrived, ge.replacedAt) {
			return true
		}
	}
	return false
}

// LetGo is the rule for a release of generation f whose call reached the
// coordinator at arrived and whose answer came back after the next grant,
// stamped at grantAt: if arrived is no later than grantAt, the release is
// what let the lease go, and the history's end of it, events[i] (the
// expiry guessed at that grant, or the release dated at its answer), is
// the release dated at arrived; LetGo reports whether it was. Dated at
// the grant as an expiry, or after it, the end would claim the lease ran
// past the next grant: a mutual-exclusion violation of the lab's making.
func LetGo(events []history.Event, i int, f leasefence.Fence, arrived, grantAt time.Duration) bool {
	if arrived > grantAt {
		return false
	}
	if i >= 0 && i < len(events) && events[i].Fence == f {
		switch e := &events[i]; {
		case e.Kind == history.Expired:
			e.Kind, e.At, e.Deadline = history.Released, arrived, 0
		case e.Kind == history.Released && e.At > grantAt:
			e.At = arrived
		}
	}
	return true
}

// coordClock is the coordinator's clock: true time since the run began,
// at its drift. It stamps the in-memory coordinator's grants; coordTrue
// maps a stamp back to true time.
type coordClock struct {
	leasefence.Clock
	rate float64
}

func newCoordClock(start time.Time, ppm float64) *coordClock {
	c := &coordClock{rate: 1 + ppm/1e6}
	c.Clock = leasefence.NewClock("coordinator", func() time.Duration {
		return time.Duration(float64(time.Since(start)) * c.rate)
	})
	return c
}

// trueAt is the true instant at which the coordinator's clock reads i.
func (c *coordClock) trueAt(i leasefence.Instant) time.Duration {
	return time.Duration(math.Ceil(float64(i.Offset()) / c.rate))
}

// coordSide is the coordinator's side of the wire for one mode: every
// call an agent's fault layer lets through reaches the backend's service
// here, and what the coordinator did is recorded as it is done, whether or
// not its reply then reaches the agent.
//
// Acquires pass it concurrently, as they reach a real coordinator. A
// grant is recorded at the instant the coordinator stamped it with (its
// expiry less its TTL), not when its reply came back, and the history
// lists grants in the order of their fences (assemble): two grants on
// different resources could otherwise be listed in the order their calls
// returned, and the checker would rightly call the lower fence a reuse.
type coordSide struct {
	w *world
}

// Acquire passes an acquire to the coordinator, and returns its outcome
// with the coordinator incarnation that granted it. A fence newly minted
// is pushed to the resource's gate when the push is on, whatever becomes
// of the reply: the coordinator pushes it, as in the simulator.
func (c *coordSide) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, int32, error) {
	defer c.w.holdOffRestarts()()
	returned := c.w.call("Acquire", req.Holder, req.Resource)
	out, err := c.w.svc().Acquire(ctx, req)
	returned()
	if h, ok := c.w.backend.(CoarseRetryHinter); ok && h.CoarseRetryHints() && err == nil && !out.OK {
		// Coarse retry hints (etcd's are whole seconds): agents that
		// waited them out would miss every release and expiry in between,
		// and poll in step. A hint of at most a quarter TTL keeps them as
		// keen as the simulator's.
		out.RetryAfter = min(out.RetryAfter, c.w.r.sc.TTL/4)
	}
	ri := agentIndex(c.w.r.h.Resources, req.Resource)
	if err == nil && ri >= 0 && !out.OK {
		c.w.refused(ri, out.Reason)
	}
	if err != nil || !out.OK {
		return out, 0, err
	}
	fresh, epoch := c.w.granted(agentIndex(c.w.r.h.Agents, req.Holder), ri, out.Grant)
	c.w.genuine.set(ri, leasefence.Lease{Token: out.Grant.Token, Proof: out.Grant.Proof})
	if fresh && c.w.r.sc.Push.Enabled {
		c.w.push(ri, out.Grant.Token, epoch)
	}
	return out, epoch, nil
}

func (c *coordSide) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	defer c.w.holdOffRestarts()()
	returned := c.w.call("Renew", req.Token.Holder, req.Token.Resource)
	out, err := c.w.svc().Renew(ctx, req)
	returned()
	ri := agentIndex(c.w.r.h.Resources, req.Token.Resource)
	switch {
	case err != nil || ri < 0:
	case out.OK:
		c.w.extended(ri, out.Grant)
	case out.Reason == leasefence.ReasonExpired:
		c.w.ended(ri, req.Token.Fence, history.Expired, 0)
	}
	return out, err
}

func (c *coordSide) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	defer c.w.holdOffRestarts()()
	sent := c.w.r.now()
	returned := c.w.call("Release", t.Holder, t.Resource)
	out, err := c.w.svc().Release(ctx, t)
	returned()
	if ri := agentIndex(c.w.r.h.Resources, t.Resource); err == nil && out.OK && ri >= 0 {
		if !c.w.ended(ri, t.Fence, history.Released, sent) {
			c.w.releasedOther(ri, t, sent)
		}
	}
	return out, err
}

// granted records a grant: a new generation (and the end of the
// resource's previous one, which a new grant proves, unless the grant is
// one recorded late: GuessedEnds.Grant), or nothing for an answer
// replayed to a retried request. It reports whether the grant is
// fresh, and the incarnation that granted it.
func (w *world) granted(holder, ri int, g leasefence.Grant) (bool, int32) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if holder < 0 || ri < 0 {
		return false, w.incarnation
	}
	cur := &w.gens[ri]
	if cur.known && cur.fence == g.Token.Fence && cur.incarnation == w.incarnation && cur.agent == holder {
		return false, cur.incarnation // a replayed grant: minted once, already in the history
	}
	// The same fence to another holder is no replay: a counter that went
	// back (a failover's promoted replica) minted it again, and the
	// history must show the second grant for the checker to judge it.
	// The instant the coordinator minted the fence, as it stamped it.
	at := min(w.clock.trueAt(g.CoordinatorExpiresAt.Add(-g.TTL)), r.now())
	event := -1
	if !r.stopped {
		event = len(r.emitted[w.mode])
	}
	takeover, expiry, expired := cur.guessed.Grant(&r.h, w.mode, ri, cur.newest(w.incarnation), g.Token.Fence, at, event)
	if takeover && cur.known && cur.ended && cur.incarnation == w.incarnation && cur.released >= 0 {
		// Released before this grant was recorded, but maybe answered
		// after its stamp.
		LetGo(r.emitted[w.mode], cur.released, cur.fence, cur.releaseCalled, at)
	}
	if expired {
		r.emitAtLocked(w.mode, expiry, at)
	}
	end := w.clock.trueAt(g.CoordinatorExpiresAt)
	w.maxFence = max(w.maxFence, g.Token.Fence)
	r.emitAtLocked(w.mode, history.Event{Kind: history.Granted, Agent: holder, Resource: ri, Fence: g.Token.Fence,
		Incarnation: w.incarnation, Other: -1, RequestID: g.RequestID, Deadline: end}, at)
	if takeover {
		*cur = genState{known: true, agent: holder, fence: g.Token.Fence, incarnation: w.incarnation, coordEnd: end, guessed: cur.guessed, released: -1}
	}
	return true, w.incarnation
}

// extended records a renewal the coordinator granted.
func (w *world) extended(ri int, g leasefence.Grant) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := &w.gens[ri]
	if !cur.known || cur.fence != g.Token.Fence || cur.incarnation != w.incarnation {
		return
	}
	cur.coordEnd = w.clock.trueAt(g.CoordinatorExpiresAt)
	r.emitLocked(w.mode, history.Event{Kind: history.Extended, Agent: cur.agent, Resource: ri, Fence: cur.fence,
		Incarnation: cur.incarnation, Other: -1, Deadline: cur.coordEnd})
}

// ended records that the coordinator let a generation go: released (by
// a call that reached it at true instant called), or (a renewal refused
// as expired) expired.
func (w *world) ended(ri int, f leasefence.Fence, kind history.Kind, called time.Duration) bool {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := &w.gens[ri]
	if !cur.known || cur.ended || cur.fence != f || cur.incarnation != w.incarnation {
		return false
	}
	cur.ended = true
	e := history.Event{Kind: kind, Agent: cur.agent, Resource: ri, Fence: f, Incarnation: cur.incarnation, Other: -1}
	if kind == history.Expired {
		e.Deadline = cur.coordEnd
	}
	if kind == history.Released && !r.stopped {
		cur.released, cur.releaseCalled = len(r.emitted[w.mode]), called
	}
	r.emitLocked(w.mode, e)
	return true
}

// refused records what the coordinator's refusal of an acquire of
// resource ri, for reason, says of the resource's newest generation
// (RefusalEnds).
func (w *world) refused(ri int, reason leasefence.Reason) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := &w.gens[ri]
	if e, ok := RefusalEnds(reason, ri, cur.newest(w.incarnation)); ok {
		cur.ended = true
		r.emitLocked(w.mode, e)
	}
}

// newest is the generation as the rules of GuessedEnds read it, the
// coordinator being at incarnation inc: one an earlier incarnation granted
// was forgotten at the restart, which ended it.
func (cur *genState) newest(inc int32) Newest {
	return Newest{Known: cur.known, Ended: cur.ended || cur.incarnation != inc, Agent: cur.agent, Fence: cur.fence,
		Incarnation: cur.incarnation, Deadline: cur.coordEnd}
}

// releasedOther records a release the coordinator answered OK for a
// generation that is not the resource's live one (an older fence, or one
// already let go), whose call reached the coordinator at true instant
// sent, as GuessedEnds.Released judges it.
func (w *world) releasedOther(ri int, t leasefence.Token, sent time.Duration) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.gens[ri].guessed.Released(r.emitted[w.mode], t.Fence, w.incarnation, sent) {
		return
	}
	r.emitLocked(w.mode, history.Event{Kind: history.Released, Agent: agentIndex(r.h.Agents, t.Holder), Resource: ri, Fence: t.Fence,
		Incarnation: w.incarnation, Other: -1})
}

// push is the coordinator pushing a new fence to the resource's gate
// (Admit), after the scenario's push delay, unless the push is lost. It
// runs beside the agents, until the run ends.
func (w *world) push(ri int, t leasefence.Token, epoch int32) {
	r := w.r
	w.pushMu.Lock()
	d, lost := w.pushes.Draw()
	w.pushMu.Unlock()
	e := history.Event{Kind: history.AdmitPushed, Agent: agentIndex(r.h.Agents, t.Holder), Resource: ri, Fence: t.Fence,
		Incarnation: epoch, Other: -1}
	switch {
	case lost:
		e.Kind = history.PushDropped
		r.emit(w.mode, e)
		return
	case w.discipline == history.DisciplineNaive:
		return // as in the simulator, a naive resource has no gate to push to
	}
	r.after(r.now()+d, e.Agent, func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		// The push is dated from when it was sent, and says how long it
		// took to be known applied (Dur): a refusal by the floor it raised
		// cannot come before it, nor a commit admitted below it be judged
		// until it is known applied.
		sent := r.now()
		err := w.resources[ri].Admit(cctx, t)
		if err != nil && !errors.Is(err, leasefence.ErrStaleFence) {
			return // a push that did not arrive is a lost push
		}
		floor, ferr := w.resources[ri].Floor(cctx)
		if ferr != nil {
			return
		}
		e.Other, e.OtherFence = agentIndex(r.h.Agents, floor.Holder), floor.Fence
		if floor.Fence > t.Fence {
			e.Outcome = history.OutcomeBelowFloor
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		e.Dur = r.now() - sent
		r.emitAtLocked(w.mode, e, sent)
	})
}
