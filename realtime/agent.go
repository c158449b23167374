package realtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	agentpkg "github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// agent is one process taking leases, on its own goroutine and its own
// clock. Its random streams are seeded as the simulator seeds its agents',
// so its k-th think time, stall and network fate are the same in both
// modes; when they happen is real.
type agent struct {
	w        *world
	idx      int
	name     string
	script   []spec.Action
	rate     float64
	offset   time.Duration
	clock    leasefence.Clock
	client   *leasefence.Client
	net      *Faults
	rngThink *rand.Rand
	rngStall *rand.Rand
	rngPick  *rand.Rand
	picks    int

	partitions atomic.Int32 // > 0 while cut off

	// The agent's own state, touched only by its goroutine.
	resource   int // held or wanted, or -1
	lease      *leasefence.Lease
	epoch      int32              // the coordinator incarnation that granted lease
	naiveUntil leasefence.Instant // naive mode: reply arrival + TTL, on the agent's clock
	renewSent  time.Duration      // true instant the lease was last anchored
	renewing   bool               // a renewal went unanswered: no more are sent (as in the simulator)
	lost       bool               // a renewal was refused
	checked    bool
}

func newAgent(w *world, i int, name string, script []spec.Action) (*agent, error) {
	sc := &w.r.sc
	stream := func(purpose uint64) *rand.Rand {
		return rand.New(rand.NewPCG(sc.Seed^purpose*0x9e3779b97f4a7c15, uint64(i)+1))
	}
	a := &agent{w: w, idx: i, name: name, script: script, resource: -1,
		rngThink: stream(1), rngStall: stream(2), rngPick: stream(4)}
	clockRNG := stream(5)
	ppm := sc.Clocks.DriftPPM.Min + clockRNG.Float64()*(sc.Clocks.DriftPPM.Max-sc.Clocks.DriftPPM.Min)
	a.offset = sc.Clocks.Offset.Min + time.Duration(clockRNG.Float64()*float64(sc.Clocks.Offset.Max-sc.Clocks.Offset.Min))
	if ac, ok := sc.Clocks.Agent[name]; ok {
		ppm, a.offset = ac.DriftPPM, ac.Offset
	}
	a.rate = 1 + ppm/1e6
	start := w.r.start
	// The agent's clock: the monotonic clock since the run began, at the
	// agent's drift, from its offset. A negative offset is taken up by a
	// constant so that the clock never reads below zero.
	base := max(0, -a.offset)
	a.clock = leasefence.NewClock(leasefence.Domain(name), func() time.Duration {
		return base + a.offset + time.Duration(float64(time.Since(start))*a.rate)
	})
	a.offset += base
	var key [32]byte
	for j := range key {
		key[j] = byte(clockRNG.Uint32())
	}
	c, err := leasefence.NewClient(leasefence.ClientOptions{
		Clock: a.clock, Holder: name, ClockSkew: sc.ClockSkew,
		Entropy: rand.NewChaCha8(key), RequestRecord: 16,
	})
	if err != nil {
		return nil, fmt.Errorf("realtime: client for %s: %w", name, err)
	}
	a.client = c
	a.net = NewFaults(func() leasefence.Service { return w.side }, sc.Network, sc.Seed, uint64(i)+1, func() bool { return a.partitions.Load() > 0 }, a.observe)
	return a, nil
}

// trueAt is the true instant at which the agent's clock reads i.
func (a *agent) trueAt(i leasefence.Instant) time.Duration {
	return time.Duration(math.Ceil(float64(i.Offset()-a.offset) / a.rate))
}

func (a *agent) emit(e history.Event) { a.w.r.emit(a.w.mode, e) }

// event is an event of kind about the agent and the lease it holds, if
// any.
func (a *agent) event(kind history.Kind) history.Event {
	e := history.Event{Kind: kind, Agent: a.idx, Resource: a.resource, Other: -1}
	if a.lease != nil {
		e.Fence, e.Incarnation = a.lease.Token.Fence, a.epoch
	}
	return e
}

// observe turns what the fault layer did to a call into events.
func (a *agent) observe(c Call, kind history.Kind, d time.Duration) {
	e := history.Event{Kind: kind, Agent: a.idx, Resource: a.resource, Other: -1, Request: c.Request,
		RequestID: c.RequestID, Fence: c.Fence, Dur: d}
	if c.Fence != 0 {
		e.Incarnation = a.epoch
	}
	a.emit(e)
}

// libraryError records an error the library never should return; the
// agent stops.
func (a *agent) libraryError(call string, err error) {
	a.emit(history.Event{Kind: history.LibraryError, Agent: a.idx, Resource: a.resource, Other: -1,
		Detail: fmt.Sprintf("%s: %s: %v", a.name, call, err)})
}

// callCtx bounds one call.
func (a *agent) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.w.r.timeout)
}

func (a *agent) run(ctx context.Context) {
	if len(a.script) > 0 {
		a.runScript(ctx)
		<-ctx.Done() // the run lasts its duration, as the simulator's does
		return
	}
	sc := &a.w.r.sc
	if a.sleep(ctx, sc.Agent.Think.Sample(a.rngThink)) != nil {
		return
	}
	for ctx.Err() == nil {
		if a.w.r.waitUnpaused(ctx) != nil {
			return
		}
		wait, ok := a.acquire(ctx, a.pick(), nil, nil)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			// A denied agent waits out the coordinator's hint, but never
			// more than a quarter of the TTL: etcd's hints are whole
			// seconds, and agents that waited them out would miss every
			// release and expiry in between, and poll in step.
			wait = min(wait, sc.TTL/4)
			if wait <= 0 {
				wait = sc.Agent.Think.Sample(a.rngThink)
			}
			if a.sleep(ctx, wait) != nil {
				return
			}
			continue
		}
		a.work(ctx)
		if ctx.Err() != nil {
			return
		}
		a.giveUp(history.OutcomeDone) // after a store error, if work left a lease
		if a.sleep(ctx, sc.Agent.Think.Sample(a.rngThink)) != nil {
			return
		}
	}
}

// pick chooses the resource of the agent's next attempt.
func (a *agent) pick() int {
	sc := &a.w.r.sc
	n := sc.Resources
	switch sc.Pick {
	case spec.PickFixed:
		return a.idx % n
	case spec.PickRoundRobin:
		a.picks++
		return (a.idx + a.picks - 1) % n
	}
	return a.rngPick.IntN(n)
}

// acquire acquires resource ri, resending the same request after no
// answer as the scenario's network says. It reports whether the agent now
// holds a lease, and otherwise the coordinator's retry hint.
func (a *agent) acquire(ctx context.Context, ri int, reqDelay, repDelay *time.Duration) (time.Duration, bool) {
	sc := &a.w.r.sc
	a.resource = ri
	req, err := a.client.BeginAcquire(a.w.r.h.Resources[ri])
	if err != nil {
		a.libraryError("BeginAcquire", err)
		return 0, false
	}
	sent := a.w.r.now()
	wait := sc.Network.RetryAfter
	if wait <= 0 {
		wait = 4 * sc.TTL
	}
	for retries := 0; ; retries++ {
		attempt := a.w.r.now()
		cctx, cancel := a.callCtx(ctx)
		out, err := a.net.AcquireCall(cctx, req, Call{Request: history.RequestAcquire, RequestID: req.RequestID,
			RequestDelay: reqDelay, ReplyDelay: repDelay})
		cancel()
		if ctx.Err() != nil {
			return 0, false
		}
		if err == nil {
			if !out.OK {
				a.emit(history.Event{Kind: history.Denied, Agent: a.idx, Resource: ri, Other: agentIndex(a.w.r.h.Agents, out.HeldBy),
					RequestID: req.RequestID, Reason: out.Reason, Dur: out.RetryAfter})
				if len(a.script) > 0 {
					// A scripted agent does only what its script says: the
					// denial ends its acquire.
					a.emit(history.Event{Kind: history.AcquireAbandoned, Agent: a.idx, Resource: ri, Other: -1,
						Request: history.RequestAcquire, RequestID: req.RequestID, Outcome: history.OutcomeDenied})
				}
				return out.RetryAfter, false
			}
			return 0, a.acquired(req, out.Grant, sent)
		}
		// No answer: wait out the rest of the retry timer, then resend the
		// same request, or give up.
		if a.sleep(ctx, attempt+wait-a.w.r.now()) != nil {
			return 0, false
		}
		if sc.Network.RetryAfter <= 0 || retries >= sc.Network.MaxRetries {
			a.emit(history.Event{Kind: history.AcquireAbandoned, Agent: a.idx, Resource: ri, Other: -1,
				Request: history.RequestAcquire, RequestID: req.RequestID, Outcome: history.OutcomeNoReply})
			return 0, false
		}
		a.emit(history.Event{Kind: history.RequestRetried, Agent: a.idx, Resource: ri, Other: -1,
			Request: history.RequestAcquire, RequestID: req.RequestID})
	}
}

// acquired completes an acquire with its grant.
func (a *agent) acquired(req leasefence.AcquireRequest, g leasefence.Grant, sent time.Duration) bool {
	l, err := a.client.CompleteAcquire(req, g)
	if err != nil {
		a.libraryError("CompleteAcquire", err)
		return false
	}
	ri := a.resource
	a.epoch = a.w.incarnationOf(ri, g.Token.Fence)
	a.lease, a.renewSent, a.renewing, a.lost, a.checked = l, sent, false, false, false
	a.emit(history.Event{Kind: history.Acquired, Agent: a.idx, Resource: ri, Fence: g.Token.Fence,
		Incarnation: a.epoch, Other: -1, RequestID: g.RequestID, Deadline: a.believe(l)})
	if a.w.r.sc.Push.Enabled {
		a.w.push(ri, g.Token)
	}
	return true
}

// believe sets the agent's belief from a fresh lease and returns the true
// instant it lasts until: the client's deadline in fenced mode, the naive
// "reply arrival + TTL" in naive mode.
func (a *agent) believe(l *leasefence.Lease) time.Duration {
	if a.w.mode == history.Naive {
		now, _ := a.clock.Now()
		a.naiveUntil = now.Add(l.TTL)
		return a.trueAt(a.naiveUntil)
	}
	return a.trueAt(l.Deadline)
}

// work is one lease's writes: check, stall, write, as many times as the
// scenario says, renewing on the way; then release or let it lapse.
func (a *agent) work(ctx context.Context) {
	sc := &a.w.r.sc
	for writes := 0; ; {
		if a.lost {
			a.giveUp(history.OutcomeRenewRefused)
			return
		}
		if a.w.r.waitUnpaused(ctx) != nil {
			return
		}
		if !a.check() {
			a.giveUp(history.OutcomeCheckFailed)
			return
		}
		// The gap: a stall between the check and the write, in which the
		// agent does nothing at all, renewals included.
		d := sc.Agent.Stall.Sample(a.rngStall)
		began := a.event(history.StallBegan)
		began.Dur = d
		a.emit(began)
		if sleep(ctx, d) != nil {
			return
		}
		a.emit(a.event(history.StallEnded))
		landed, ok := a.write(ctx)
		switch {
		case !ok:
			return
		case !landed:
			a.giveUp(history.OutcomeCommitRefused)
			return
		}
		writes++
		if writes >= sc.Agent.WritesPerLease {
			a.finish(ctx)
			return
		}
		if a.sleep(ctx, sc.Agent.WorkGap.Sample(a.rngStall)) != nil {
			return
		}
	}
}

// check is the validity check before a write: HasExpired in fenced mode,
// now < expiresAt in naive mode. Both are true only at the instant they
// are computed.
func (a *agent) check() bool {
	ok := agentpkg.CheckValid(a.w.mode, a.lease, a.clock, a.naiveUntil)
	a.checked = ok
	kind := history.CheckPassed
	if !ok {
		kind = history.CheckFailed
	}
	a.emit(a.event(kind))
	return ok
}

// write lands the agent's write: through the gate in fenced mode, straight
// at the resource in naive mode. It reports whether it landed, and ok
// false if the run ended or the store failed.
//
// Writes to one resource are made one at a time, each with its event, so
// that the history lists them in the order the resource applied them: the
// gate still decides every one of them, in its own transaction.
func (a *agent) write(ctx context.Context) (landed, ok bool) {
	w, ri, t := a.w, a.resource, a.lease.Token
	res := w.resources[ri]
	// A write is not bounded by the TTL: a slow write is the very gap the
	// gate is for. Only a store that does not answer at all is an error.
	wctx, cancel := context.WithTimeout(ctx, max(10*w.r.sc.TTL, writeTimeout))
	defer cancel()
	w.resMu[ri].Lock()
	defer w.resMu[ri].Unlock()
	if w.mode == history.Naive {
		if err := res.Write(wctx, t); err != nil {
			return false, a.storeError(ctx, "Write", err)
		}
		a.emit(a.event(history.WriteLanded))
		return true, true
	}
	err := res.Commit(wctx, t)
	if err == nil {
		a.emit(a.event(history.CommitAdmitted))
		return true, true
	}
	var floor leasefence.Token
	var stale *leasefence.StaleFenceError
	switch {
	case errors.As(err, &stale):
		floor = leasefence.Token{Holder: stale.Rejection.FloorHolder, Fence: stale.Rejection.FloorFence}
	case errors.Is(err, leasefence.ErrTokenConflict):
		if floor, err = res.Floor(wctx); err != nil {
			return false, a.storeError(ctx, "Floor", err)
		}
	default:
		return false, a.storeError(ctx, "Commit", err)
	}
	e := a.event(history.CommitRefused)
	e.Other, e.OtherFence = agentIndex(w.r.h.Agents, floor.Holder), floor.Fence
	a.emit(e)
	return false, true
}

// writeTimeout is the least time a write is given before the store is
// taken to have failed.
const writeTimeout = 10 * time.Second

// storeError records a store that failed a write: the run ending is not a
// failure; anything else is, since the write's fate is unknown.
func (a *agent) storeError(ctx context.Context, call string, err error) bool {
	if ctx.Err() == nil {
		a.libraryError(call, err)
	}
	return false
}

// finish ends a lease after its last write: release it, or let it lapse.
func (a *agent) finish(ctx context.Context) {
	if a.w.r.sc.Agent.Release && a.lease != nil {
		a.release(ctx)
		return
	}
	a.giveUp(history.OutcomeDone)
}

// release gives the lease up and sends its release.
func (a *agent) release(ctx context.Context) {
	t, ri, inc := a.lease.Token, a.resource, a.epoch
	a.giveUp(history.OutcomeReleased)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	out, err := a.net.Release(cctx, t)
	if err == nil && !out.OK {
		a.emit(history.Event{Kind: history.ReleaseRefused, Agent: a.idx, Resource: ri, Fence: t.Fence,
			Incarnation: inc, Other: -1, Reason: out.Reason})
	}
}

// giveUp ends the agent's belief in its lease now, for the reason given.
func (a *agent) giveUp(why history.Outcome) {
	if a.lease != nil {
		e := a.event(history.LeaseAbandoned)
		e.Outcome = why
		a.emit(e)
	}
	a.lease, a.lost, a.checked = nil, false, false
}

// sleep waits d, renewing the lease held when its renewal comes due: an
// agent renews while it thinks or waits between writes, never while it
// stalls.
func (a *agent) sleep(ctx context.Context, d time.Duration) error {
	r := a.w.r
	until := r.now() + d
	for {
		left := until - r.now()
		due, renew := a.renewalDue()
		if !renew || due >= until {
			return sleep(ctx, left)
		}
		if err := sleep(ctx, due-r.now()); err != nil {
			return err
		}
		a.renew(ctx, nil, nil)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// renewalDue is the true instant the held lease's renewal is due, if one
// is.
func (a *agent) renewalDue() (time.Duration, bool) {
	sc := &a.w.r.sc
	if a.lease == nil || a.renewing || a.lost || sc.Agent.RenewAt <= 0 || len(a.script) > 0 {
		return 0, false
	}
	return a.renewSent + time.Duration(sc.Agent.RenewAt*float64(sc.TTL)), true
}

// renew sends a renewal of the held lease and takes its answer.
func (a *agent) renew(ctx context.Context, reqDelay, repDelay *time.Duration) {
	req, err := a.client.BeginRenewal(a.lease)
	if err != nil {
		a.libraryError("BeginRenewal", err)
		a.lost = true
		return
	}
	sent := a.w.r.now()
	cctx, cancel := a.callCtx(ctx)
	out, err := a.net.RenewCall(cctx, req, Call{Request: history.RequestRenew, RequestID: req.RequestID,
		Fence: req.Token.Fence, RequestDelay: reqDelay, ReplyDelay: repDelay})
	cancel()
	switch {
	case err != nil:
		// No answer. As in the simulator the agent sends no other renewal,
		// and its belief runs out at the deadline it has.
		a.renewing = true
	case out.OK:
		l, err := a.client.CompleteRenewal(req, out.Grant)
		if err != nil {
			a.libraryError("CompleteRenewal", err)
			a.lost = true
			return
		}
		a.lease, a.renewSent = l, sent
		a.emit(history.Event{Kind: history.Renewed, Agent: a.idx, Resource: a.resource, Fence: l.Token.Fence,
			Incarnation: a.epoch, Other: -1, RequestID: req.RequestID, Deadline: a.believe(l)})
	default:
		e := a.event(history.RenewRefused)
		e.RequestID, e.Reason = req.RequestID, out.Reason
		a.emit(e)
		a.lost = true
	}
}

// runScript does the agent's scripted actions at their instants, one after
// another: an action whose instant passes while the one before it still
// waits for a reply runs as soon as that returns.
func (a *agent) runScript(ctx context.Context) {
	r := a.w.r
	for _, act := range a.script {
		if sleep(ctx, act.At-r.now()) != nil {
			return
		}
		switch act.Do {
		case spec.ActAcquire:
			ri := 0
			if act.Resource != "" {
				ri = agentIndex(r.h.Resources, act.Resource)
			}
			a.acquire(ctx, ri, act.RequestDelay, act.ReplyDelay)
		case spec.ActCheck:
			a.check()
		case spec.ActStall:
			e := a.event(history.StallBegan)
			e.Dur = act.Duration
			a.emit(e)
			if sleep(ctx, act.Duration) != nil {
				return
			}
			a.emit(a.event(history.StallEnded))
		case spec.ActWrite:
			if a.lease == nil || !a.checked {
				a.emit(a.event(history.WriteSkipped))
				continue
			}
			a.write(ctx)
		case spec.ActRenew:
			if a.lease != nil {
				a.renew(ctx, act.RequestDelay, act.ReplyDelay)
			}
		case spec.ActRelease:
			if a.lease != nil {
				a.release(ctx)
			}
		}
	}
}
