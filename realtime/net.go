package realtime

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// The fault layer: the network between an agent and its coordinator. Each
// message's fate (delays, loss, a duplicate) is drawn by the agent from its
// own network stream when it is sent, and the loss of its reply when the
// coordinator has answered, as the simulator draws them: the k-th message
// of an agent meets the same fate on both drivers, in both modes; only
// when it happens is real. The delays are real sleeps, and a lost reply
// means the request reached the coordinator and took effect, so a retry
// tests the coordinator's idempotency for real.

// FaultStats counts what a fault layer did. Each counter counts messages.
type FaultStats struct {
	Calls           int64 `json:"calls"`
	RequestsDropped int64 `json:"requests_dropped"` // including those cut by a partition
	Partitioned     int64 `json:"partitioned"`
	Duplicated      int64 `json:"duplicated"`
	RepliesDropped  int64 `json:"replies_dropped"`
}

// Add returns the sum of s and o.
func (s FaultStats) Add(o FaultStats) FaultStats {
	return FaultStats{Calls: s.Calls + o.Calls, RequestsDropped: s.RequestsDropped + o.RequestsDropped,
		Partitioned: s.Partitioned + o.Partitioned, Duplicated: s.Duplicated + o.Duplicated,
		RepliesDropped: s.RepliesDropped + o.RepliesDropped}
}

type faultCounters struct {
	calls, reqDropped, partitioned, duplicated, repDropped atomic.Int64
}

func (c *faultCounters) stats() FaultStats {
	return FaultStats{Calls: c.calls.Load(), RequestsDropped: c.reqDropped.Load(), Partitioned: c.partitioned.Load(),
		Duplicated: c.duplicated.Load(), RepliesDropped: c.repDropped.Load()}
}

// message is one request on the wire, with what it concerns.
type message struct {
	req      agent.Request
	acquire  leasefence.AcquireRequest
	renew    leasefence.RenewRequest
	resource int
	fate     agent.SendFate
}

func (m *message) id() string {
	switch m.req.Kind {
	case history.RequestAcquire:
		return m.acquire.RequestID
	case history.RequestRenew:
		return m.renew.RequestID
	}
	return ""
}

func (m *message) fence() leasefence.Fence {
	switch m.req.Kind {
	case history.RequestRenew:
		return m.renew.Token.Fence
	case history.RequestRelease:
		return m.req.Release.Fence
	}
	return 0
}

// event is an event of kind about m.
func (d *driver) event(m *message, kind history.Kind, dur time.Duration) history.Event {
	return history.Event{Kind: kind, Agent: d.idx, Resource: m.resource, Other: -1, Fence: m.fence(),
		Incarnation: m.req.Epoch, Request: m.req.Kind, RequestID: m.id(), Dur: dur}
}

// send puts the agent's request on the wire; d.mu is held.
func (d *driver) send(req agent.Request) {
	m := &message{req: req, resource: d.ag.Resource()}
	switch req.Kind {
	case history.RequestAcquire:
		m.acquire = d.ag.PendingAcquire()
	case history.RequestRenew:
		m.renew = d.ag.PendingRenewal()
	}
	dropReqs, _ := d.dropRates()
	m.fate = d.ag.DrawSend(&req, dropReqs)
	d.stats.calls.Add(1)
	d.emit(d.event(m, history.RequestSent, m.fate.RequestDelay))
	if m.fate.Lost || d.partitions.Load() > 0 {
		d.dropped(m)
		return
	}
	r := d.w.r
	sent := r.now()
	r.after(sent+m.fate.RequestDelay, d.idx, func(ctx context.Context) { d.deliver(ctx, m) })
	if m.fate.Duplicated {
		d.stats.duplicated.Add(1)
		lag := m.fate.RequestDelay + m.fate.DuplicateLag
		d.emit(d.event(m, history.RequestDuplicated, lag))
		r.after(sent+lag, d.idx, func(ctx context.Context) { d.deliver(ctx, m) })
	}
}

func (d *driver) dropped(m *message) {
	d.stats.reqDropped.Add(1)
	if d.partitions.Load() > 0 {
		d.stats.partitioned.Add(1)
	}
	d.emit(d.event(m, history.RequestDropped, 0))
}

// deliver is m reaching the coordinator, and its reply coming back.
func (d *driver) deliver(ctx context.Context, m *message) {
	if d.partitions.Load() > 0 {
		d.dropped(m)
		return
	}
	w := d.w
	cctx, cancel := context.WithTimeout(ctx, w.r.timeout)
	defer cancel()
	var reply func(now time.Duration) []agent.Output
	switch m.req.Kind {
	case history.RequestAcquire:
		out, epoch, err := w.side.Acquire(cctx, m.acquire)
		d.brokeContract("Acquire", err)
		if err != nil {
			return // no answer: the agent's retry timer takes it from here
		}
		reply = func(now time.Duration) []agent.Output {
			return d.ag.AcquireReplied(now, m.acquire.RequestID, out, epoch)
		}
	case history.RequestRenew:
		out, err := w.side.Renew(cctx, m.renew)
		d.brokeContract("Renew", err)
		if err != nil {
			return // no answer: the agent's belief runs out at the deadline it has
		}
		reply = func(now time.Duration) []agent.Output { return d.ag.RenewReplied(now, m.renew.RequestID, out) }
	case history.RequestRelease:
		out, err := w.side.Release(cctx, m.req.Release)
		d.brokeContract("Release", err)
		if err == nil && !out.OK {
			d.emit(history.Event{Kind: history.ReleaseRefused, Agent: d.idx, Resource: m.resource, Fence: m.req.Release.Fence,
				Incarnation: m.req.Epoch, Other: -1, Reason: out.Reason})
		}
	}
	_, dropReps := d.dropRates()
	d.mu.Lock()
	lost := d.ag.DrawReplyLost(dropReps)
	d.mu.Unlock()
	if lost || d.partitions.Load() > 0 {
		d.stats.repDropped.Add(1)
		d.emit(d.event(m, history.ReplyDropped, 0))
		return
	}
	if reply == nil {
		return
	}
	d.w.r.after(d.w.r.now()+m.fate.ReplyDelay, d.idx, func(context.Context) { d.feed(reply) })
}

// brokeContract records err, the error of the agent's call to the lock,
// as the library's error if the lock broke its contract (ErrContract: no
// lease and no error, a panic).
func (d *driver) brokeContract(call string, err error) {
	if errors.Is(err, ErrContract) {
		d.mu.Lock()
		d.libraryError(call, err)
		d.mu.Unlock()
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
