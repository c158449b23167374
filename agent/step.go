package agent

import (
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// The inputs. Each takes the driver's current true instant and returns the
// outputs the agent asks for, in the order the driver must carry them out.

// Start begins the agent's run: an unscripted agent thinks, then makes its
// first attempt.
func (a *Agent) Start(now time.Duration) []Output {
	a.begin()
	if !a.scripted {
		a.arm(TimerStep, now+a.sc.Agent.Think.Sample(a.rngThink), a.gen)
	}
	return a.b.out
}

// Fire is a timer the agent armed firing.
func (a *Agent) Fire(now time.Duration, t Timer, gen uint32) []Output {
	a.begin()
	switch t {
	case TimerStep:
		if gen == a.gen {
			a.step(now)
		}
	case TimerRetry:
		if gen == a.gen {
			a.acquireTimeout(now)
		}
	case TimerRenew:
		if gen == a.renewGen {
			a.renewDue(now)
		}
	case TimerStallEnd:
		a.stallEnd(gen)
	}
	return a.b.out
}

// AcquireReplied is the coordinator's reply to the acquire with request id
// id, granted by coordinator incarnation epoch. A reply to an acquire the
// agent has settled (a duplicate, or a late one) changes nothing.
func (a *Agent) AcquireReplied(now time.Duration, id string, out leasefence.AcquireOutcome, epoch int32) []Output {
	a.begin()
	if a.phase != phAcquiring || id != a.acq.RequestID {
		return a.b.out
	}
	if out.OK {
		a.acquired(now, out.Grant, epoch)
	} else {
		a.deny(now, out)
	}
	return a.b.out
}

// RenewReplied is the coordinator's reply to the renewal with request id id.
func (a *Agent) RenewReplied(now time.Duration, id string, out leasefence.RenewOutcome) []Output {
	a.begin()
	if !a.renewing || id != a.renew.RequestID {
		return a.b.out
	}
	a.renewing = false
	if out.OK {
		a.renewed(now, out.Grant)
	} else {
		a.renewRefused(now, out.Reason)
	}
	return a.b.out
}

// Committed is the outcome of the Write the agent asked for: whether it
// landed (in fenced mode, whether the gate admitted it). A driver whose
// write failed for any other reason records the failure instead.
func (a *Agent) Committed(now time.Duration, landed bool) []Output {
	a.begin()
	if !a.writing {
		return a.b.out
	}
	a.writing = false
	if a.scripted {
		return a.b.out // a script says what comes next
	}
	switch {
	case !landed:
		a.giveUp(now, history.OutcomeCommitRefused)
		return a.b.out
	case a.lost:
		a.giveUp(now, history.OutcomeRenewRefused)
		return a.b.out
	}
	a.writes++
	if a.writes >= a.sc.Agent.WritesPerLease {
		a.finish(now) // a renewal that came due is moot: the lease is done
		return a.b.out
	}
	if a.renewLater {
		a.renewLater = false
		a.renewDue(now)
	}
	a.arm(TimerStep, now+a.sc.Agent.WorkGap.Sample(a.rngStall), a.gen)
	return a.b.out
}

// WriteFailed is the outcome of a Write the store failed: call is the
// call that failed and err its error (a timeout, a connection lost). The
// agent cannot know whether the write landed (the resource's own record
// says), so it records the failure and gives up its lease, as a program
// that cannot tell would.
func (a *Agent) WriteFailed(now time.Duration, call string, err error) []Output {
	a.begin()
	if !a.writing {
		return a.b.out
	}
	a.writing = false
	e := a.leaseEvent(history.WriteFailed, 0)
	e.Detail = call + ": " + err.Error()
	a.emit(e)
	if a.scripted {
		return a.b.out
	}
	a.giveUp(now, history.OutcomeWriteFailed)
	return a.b.out
}

// Script is a scripted action coming due.
func (a *Agent) Script(now time.Duration, act spec.Action) []Output {
	a.begin()
	switch act.Do {
	case spec.ActAcquire:
		if a.phase == phAcquiring {
			// An acquire is still on its way: the script's next acquire is
			// that one. Starting another would drop it unanswered, and a
			// grant it was given later would go to nobody (a reply slower
			// than the script's gap between its acquires, on a loaded
			// machine).
			break
		}
		ri := 0
		if act.Resource != "" {
			ri, _ = a.sc.ResourceIndex(act.Resource)
		}
		a.startAcquire(now, ri, act.RequestDelay, act.ReplyDelay)
	case spec.ActCheck:
		a.check()
	case spec.ActStall:
		if a.Acting() {
			a.phase = phStalled
		}
		a.emit(a.leaseEvent(history.StallBegan, act.Duration))
		a.arm(TimerStallEnd, now+act.Duration, 0)
	case spec.ActWrite:
		if a.lease == nil || !a.checked {
			a.emit(a.leaseEvent(history.WriteSkipped, 0))
			return a.b.out
		}
		a.write()
	case spec.ActRenew:
		if a.lease != nil && !a.renewing {
			a.sendRenewal(now, act.RequestDelay, act.ReplyDelay)
		}
	case spec.ActRelease:
		if a.lease != nil {
			a.release(now)
		}
	}
	return a.b.out
}

// Stall is a live intervention: the agent stalls for d from now, doing
// nothing until it ends.
func (a *Agent) Stall(now, d time.Duration) []Output {
	a.begin()
	a.stallUntil = max(a.stallUntil, now+d)
	a.emit(a.leaseEvent(history.StallBegan, d))
	a.arm(TimerStallEnd, a.stallUntil, 1)
	return a.b.out
}

// SetLossy tells the agent whether the network can now lose a message (a
// drop rate or a partition). Only then does an acquire need a timer to
// retry or give up: on a lossless network that timer would only ever fire
// as a no-op, and in a crowd there is one per attempt. An acquire sent on a
// lossless network gets its timer when the network turns lossy.
func (a *Agent) SetLossy(now time.Duration, lossy bool) []Output {
	a.begin()
	was := a.lossy
	a.lossy = lossy
	if !was && lossy && a.phase == phAcquiring && !a.scripted {
		a.arm(TimerRetry, now+a.retryWait(), a.gen)
	}
	return a.b.out
}

// step is an unscripted agent's next step.
func (a *Agent) step(now time.Duration) {
	if now < a.stallUntil {
		a.arm(TimerStep, a.stallUntil, a.gen)
		return
	}
	switch a.phase {
	case phIdle:
		a.startAcquire(now, a.pick(), nil, nil)
	case phHolding:
		if !a.check() {
			a.giveUp(now, history.OutcomeCheckFailed)
			return
		}
		d := a.sc.Agent.Stall.Sample(a.rngStall)
		a.phase = phStalled
		a.emit(a.leaseEvent(history.StallBegan, d))
		a.arm(TimerStep, now+d, a.gen)
	case phStalled:
		a.emit(a.leaseEvent(history.StallEnded, 0))
		a.phase = phHolding
		a.write()
	}
}

// write asks the driver for the write under the lease held.
func (a *Agent) write() {
	a.writing = true
	a.b.wr = WriteOp{Token: a.lease.Token, Resource: a.resource}
	a.b.out = append(a.b.out, Output{Kind: Write, Write: &a.b.wr})
}

// pick chooses the resource of the agent's next attempt.
func (a *Agent) pick() int {
	n := a.sc.Resources
	switch a.sc.Pick {
	case spec.PickFixed:
		return a.idx % n
	case spec.PickRoundRobin:
		a.picks++
		return (a.idx + a.picks - 1) % n
	}
	return a.rngPick.IntN(n)
}

func (a *Agent) startAcquire(now time.Duration, ri int, reqDelay, repDelay *time.Duration) {
	req, err := a.client.BeginAcquire(a.resources[ri])
	if err != nil {
		a.failed("BeginAcquire", err)
		return
	}
	a.gen++
	a.acq, a.acqSent, a.retries = req, now, 0
	a.resource = ri
	a.phase, a.denied = phAcquiring, false
	a.send(Request{Kind: history.RequestAcquire, RequestDelay: reqDelay, ReplyDelay: repDelay})
	if !a.scripted && a.lossy {
		a.arm(TimerRetry, now+a.retryWait(), a.gen)
	}
}

func (a *Agent) retryWait() time.Duration { return RetryWait(a.sc) }

// RetryWait is how long an agent of sc waits for an acquire's reply before
// it resends the request, or gives up when it does not retry: the
// scenario's retry_after, or 4 x the TTL.
func RetryWait(sc *spec.Scenario) time.Duration {
	if sc.Network.RetryAfter > 0 {
		return sc.Network.RetryAfter
	}
	return 4 * sc.TTL
}

// acquireTimeout resends the pending acquire under the same request id, or
// gives up waiting.
func (a *Agent) acquireTimeout(now time.Duration) {
	if a.phase != phAcquiring {
		return
	}
	n := &a.sc.Network
	if n.RetryAfter > 0 && a.retries < n.MaxRetries {
		a.retries++
		a.emit(history.Event{Kind: history.RequestRetried, Agent: a.idx, Resource: a.resource, Other: -1,
			Request: history.RequestAcquire, RequestID: a.acq.RequestID})
		a.send(Request{Kind: history.RequestAcquire})
		a.arm(TimerRetry, now+n.RetryAfter, a.gen)
		return
	}
	a.emit(history.Event{Kind: history.AcquireAbandoned, Agent: a.idx, Resource: a.resource, Other: -1,
		Request: history.RequestAcquire, RequestID: a.acq.RequestID, Outcome: history.OutcomeNoReply})
	a.idle(now, a.sc.Agent.Think.Sample(a.rngThink))
}

func (a *Agent) acquired(now time.Duration, g leasefence.Grant, epoch int32) {
	l, err := a.client.CompleteAcquire(a.acq, g)
	if err != nil {
		a.failed("CompleteAcquire", err)
		return
	}
	a.gen++ // supersedes the retry timer
	a.lease, a.writes, a.checked, a.lost, a.renewing, a.renewLater = l, 0, false, false, false, false
	a.epoch = epoch
	a.phase = phHolding
	a.until = a.believe(l, a.acq.SentAt)
	a.emit(history.Event{Kind: history.Acquired, Agent: a.idx, Resource: a.resource, Fence: g.Token.Fence,
		Incarnation: epoch, Other: -1, RequestID: g.RequestID, Deadline: a.until})
	if a.scripted {
		return
	}
	a.scheduleRenewal(now, a.acqSent)
	a.arm(TimerStep, now, a.gen)
}

// believe sets the agent's belief from a fresh lease, whose request was
// sent at sentAt, and returns the true instant it lasts until: the
// client's deadline for a fenced contender; for a naive one, the lab's
// own naive "reply arrival + TTL", or, for a lock run in place of the
// lab's coordinator (a library's), the lock's own deadline (redsync's
// Until()), which the grant's TTL is the rest of: dated from the
// request's send, as those libraries date it. Dated from the reply's
// arrival, it would outlast the lock's deadline by the reply's network
// delay, and charge the lock containment breaches of the lab's making.
func (a *Agent) believe(l *leasefence.Lease, sentAt leasefence.Instant) time.Duration {
	if a.naive {
		if a.mode == history.Naive {
			sentAt, _ = a.clock.Now()
		}
		a.naiveUntil = sentAt.Add(l.TTL)
		return a.clock.TrueAt(a.naiveUntil)
	}
	return a.clock.TrueAt(l.Deadline)
}

func (a *Agent) deny(now time.Duration, out leasefence.AcquireOutcome) {
	a.emit(history.Event{Kind: history.Denied, Agent: a.idx, Resource: a.resource, Other: a.agentIndex(out.HeldBy),
		RequestID: a.acq.RequestID, Reason: out.Reason, Dur: out.RetryAfter})
	if a.scripted {
		// A scripted agent does only what its script says: it does not
		// try again, so the denial ends its acquire.
		a.emit(history.Event{Kind: history.AcquireAbandoned, Agent: a.idx, Resource: a.resource, Other: -1,
			Request: history.RequestAcquire, RequestID: a.acq.RequestID, Outcome: history.OutcomeDenied})
		a.phase = phIdle
		return
	}
	wait := out.RetryAfter
	if wait <= 0 {
		wait = a.sc.Agent.Think.Sample(a.rngThink)
	}
	a.idle(now, wait)
	a.denied = true
}

// scheduleRenewal arms the renewal point of a lease anchored at anchor.
func (a *Agent) scheduleRenewal(now, anchor time.Duration) {
	if a.sc.Agent.RenewAt <= 0 || a.scripted {
		return
	}
	at := max(anchor+time.Duration(a.sc.Agent.RenewAt*float64(a.sc.TTL)), now)
	a.arm(TimerRenew, at, a.renewGen)
}

// renewDue sends a renewal, unless the agent is stalled: a stalled process
// does nothing until its stall ends.
func (a *Agent) renewDue(now time.Duration) {
	if !a.Acting() || a.lease == nil || a.renewing {
		return
	}
	if a.Stalled(now) {
		a.renewLater = true
		return
	}
	a.sendRenewal(now, nil, nil)
}

func (a *Agent) sendRenewal(now time.Duration, reqDelay, repDelay *time.Duration) {
	req, err := a.client.BeginRenewal(a.lease)
	if err != nil {
		a.failed("BeginRenewal", err)
		return
	}
	a.renew, a.renewSent, a.renewing = req, now, true
	a.send(Request{Kind: history.RequestRenew, Epoch: a.epoch, RequestDelay: reqDelay, ReplyDelay: repDelay})
}

func (a *Agent) renewed(now time.Duration, g leasefence.Grant) {
	l, err := a.client.CompleteRenewal(a.renew, g)
	if err != nil {
		a.failed("CompleteRenewal", err)
		return
	}
	a.lease = l
	a.until = a.believe(l, a.renew.SentAt)
	a.emit(history.Event{Kind: history.Renewed, Agent: a.idx, Resource: a.resource, Fence: g.Token.Fence,
		Incarnation: a.epoch, Other: -1, RequestID: g.RequestID, Deadline: a.until})
	a.scheduleRenewal(now, a.renewSent)
}

func (a *Agent) renewRefused(now time.Duration, reason leasefence.Reason) {
	e := a.leaseEvent(history.RenewRefused, 0)
	e.RequestID, e.Reason = a.renew.RequestID, reason
	a.emit(e)
	if a.scripted {
		return
	}
	if a.phase == phStalled || a.writing {
		a.lost = true // it finds out after its write
		return
	}
	a.giveUp(now, history.OutcomeRenewRefused)
}

// check is the agent's validity check before a write.
func (a *Agent) check() bool {
	ok := CheckValid(a.naive, a.lease, a.clock, a.naiveUntil)
	a.checked = ok
	kind := history.CheckPassed
	if !ok {
		kind = history.CheckFailed
	}
	a.emit(a.leaseEvent(kind, 0))
	return ok
}

// finish ends a lease after its last write: release it, or let it lapse.
func (a *Agent) finish(now time.Duration) {
	if a.sc.Agent.Release && a.lease != nil {
		a.release(now)
		return
	}
	a.giveUp(now, history.OutcomeDone)
}

// release gives the lease up, then sends its release: a holder stops
// acting on a lease before it tells the coordinator, so its belief has
// ended before the coordinator can let the lease go, however long a
// driver takes between the two (a real-time one under load took longer
// than the release's network delay, and the history showed the belief
// outliving the lease).
func (a *Agent) release(now time.Duration) {
	t, epoch := a.lease.Token, a.epoch
	a.giveUp(now, history.OutcomeReleased)
	a.send(Request{Kind: history.RequestRelease, Release: t, Epoch: epoch})
}

// giveUp ends the agent's belief in its lease now, for the reason given,
// and sends it back to thinking.
func (a *Agent) giveUp(now time.Duration, why history.Outcome) {
	if a.lease != nil {
		e := a.leaseEvent(history.LeaseAbandoned, 0)
		e.Outcome = why
		a.emit(e)
	}
	a.lease, a.renewing, a.renewLater, a.lost = nil, false, false, false
	a.renewGen++
	if a.scripted {
		a.phase = phIdle
		return
	}
	a.idle(now, a.sc.Agent.Think.Sample(a.rngThink))
}

func (a *Agent) idle(now, after time.Duration) {
	a.gen++
	a.phase, a.denied = phIdle, false
	a.arm(TimerStep, now+after, a.gen)
}

// stallEnd ends a scripted stall (gen 0) or a live one (gen 1).
func (a *Agent) stallEnd(gen uint32) {
	if gen == 0 && a.phase == phStalled && a.scripted {
		a.phase = phHolding
	}
	a.emit(a.leaseEvent(history.StallEnded, 0))
}

// CheckValid is the validity check before a write, as every agent makes
// it: the client's HasExpired for a fenced contender, the naive "now < expiresAt" on
// the agent's clock for a naive one (naiveUntil: what believe set).
// Either is true only at the instant it is computed. A nil lease is never
// valid.
func CheckValid(naive bool, l *leasefence.Lease, clock leasefence.Clock, naiveUntil leasefence.Instant) bool {
	if l == nil {
		return false
	}
	if naive {
		now, err := clock.Now()
		before, err2 := now.Before(naiveUntil)
		return err == nil && err2 == nil && before
	}
	expired, err := l.HasExpired()
	return err == nil && !expired
}
