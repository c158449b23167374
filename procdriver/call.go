package procdriver

import (
	"context"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// A child's calls to the coordinator: the real etcd client, behind the
// scenario's network delays (drawn by the agent, as on every driver, and
// slept for real). What the coordinator is seen to do is reported as it
// is done, whether or not its reply then reaches the agent: the grant, the
// extension, the expiry a refused renewal reveals, the release. The parent
// judges which of them make the history (merge.go): only it sees every
// agent's.

// call is one request on the wire, with what it concerns.
type call struct {
	req      agent.Request
	acquire  leasefence.AcquireRequest
	renew    leasefence.RenewRequest
	resource int
	fate     agent.SendFate
}

// send puts the agent's request on the wire; c.mu is held.
func (c *child) send(req agent.Request) {
	m := &call{req: req, resource: c.ag.Resource()}
	e := history.Event{Kind: history.RequestSent, Agent: c.cfg.Agent, Resource: m.resource, Other: -1,
		Incarnation: req.Epoch, Request: req.Kind}
	switch req.Kind {
	case history.RequestAcquire:
		m.acquire = c.ag.PendingAcquire()
		e.RequestID = m.acquire.RequestID
	case history.RequestRenew:
		m.renew = c.ag.PendingRenewal()
		e.RequestID, e.Fence = m.renew.RequestID, m.renew.Token.Fence
	case history.RequestRelease:
		e.Fence = req.Release.Fence
	}
	m.fate = c.ag.DrawSend(&req, c.sc.Network.DropRequests)
	e.Dur = m.fate.RequestDelay
	c.emit(e, c.now())
	c.spawn(func() {
		if sleep(c.ctx, m.fate.RequestDelay) == nil {
			c.deliver(m)
		}
	})
}

// deliver is m reaching the coordinator, and its reply coming back.
func (c *child) deliver(m *call) {
	cctx, cancel := context.WithTimeout(c.ctx, c.sc.TTL)
	defer cancel()
	var reply func(now time.Duration) []agent.Output
	switch m.req.Kind {
	case history.RequestAcquire:
		out, err := c.svc().Acquire(cctx, m.acquire)
		if err != nil {
			return // no answer: the agent's retry timer takes it from here
		}
		if !out.OK {
			// etcd's retry hints are whole seconds; the in-process runner
			// caps them at a quarter TTL, and so does this one.
			out.RetryAfter = min(out.RetryAfter, c.sc.TTL/4)
		} else {
			c.granted(m.resource, out.Grant)
		}
		reply = func(now time.Duration) []agent.Output {
			return c.ag.AcquireReplied(now, m.acquire.RequestID, out, 0)
		}
	case history.RequestRenew:
		out, err := c.svc().Renew(cctx, m.renew)
		if err != nil {
			return // no answer: the agent's belief runs out at the deadline it has
		}
		c.renewAnswered(m.resource, m.renew.Token.Fence, out)
		reply = func(now time.Duration) []agent.Output { return c.ag.RenewReplied(now, m.renew.RequestID, out) }
	case history.RequestRelease:
		out, err := c.svc().Release(cctx, m.req.Release)
		if err == nil {
			e := history.Event{Kind: history.Released, Agent: c.cfg.Agent, Resource: m.resource, Fence: m.req.Release.Fence, Other: -1}
			if !out.OK {
				e.Kind, e.Reason = history.ReleaseRefused, out.Reason
			}
			c.emit(e, c.now())
		}
	}
	c.mu.Lock()
	c.ag.DrawReplyLost(c.sc.Network.DropReplies) // the draw every driver makes, in this order
	c.mu.Unlock()
	if reply == nil || sleep(c.ctx, m.fate.ReplyDelay) != nil {
		return
	}
	c.feed(reply)
}

// granted reports a grant, at the instant the coordinator stamped it with
// (its expiry less its TTL).
func (c *child) granted(ri int, g leasefence.Grant) {
	end := g.CoordinatorExpiresAt.Offset()
	c.mu.Lock()
	c.coordEnd = end
	c.mu.Unlock()
	c.emit(history.Event{Kind: history.Granted, Agent: c.cfg.Agent, Resource: ri, Fence: g.Token.Fence, Other: -1,
		RequestID: g.RequestID, Deadline: end}, min(g.CoordinatorExpiresAt.Add(-g.TTL).Offset(), c.now()))
}

// renewAnswered reports what a renewal's answer shows the coordinator did:
// extended the lease, or let it expire.
func (c *child) renewAnswered(ri int, f leasefence.Fence, out leasefence.RenewOutcome) {
	e := history.Event{Kind: history.Extended, Agent: c.cfg.Agent, Resource: ri, Fence: f, Other: -1}
	c.mu.Lock()
	switch {
	case out.OK:
		c.coordEnd = out.Grant.CoordinatorExpiresAt.Offset()
	case out.Reason == leasefence.ReasonExpired:
		e.Kind = history.Expired
	default:
		c.mu.Unlock()
		return
	}
	e.Deadline = c.coordEnd
	c.mu.Unlock()
	c.emit(e, c.now())
}
