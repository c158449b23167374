package agent

import "time"

// SendFate is what the network does to one message an agent sends, drawn
// from the agent's own network stream: the same draws in both modes, and
// on every driver, for the agent's k-th message.
type SendFate struct {
	RequestDelay time.Duration // until the coordinator has it
	ReplyDelay   time.Duration // until its reply is back, from when the coordinator answered
	Lost         bool          // the request never arrives
	Duplicated   bool          // the request arrives a second time...
	DuplicateLag time.Duration // ...this long after the first
}

// DrawSend draws the fate of request r, sent while the network drops
// requests with probability dropRequests (which a live intervention may
// change). The request's own delays, when it has them, replace the draws.
func (a *Agent) DrawSend(r *Request, dropRequests float64) SendFate {
	n := &a.sc.Network
	rng := a.rngNet
	f := SendFate{RequestDelay: n.RequestDelay.Sample(rng)}
	if r.RequestDelay != nil {
		f.RequestDelay = *r.RequestDelay
	}
	f.ReplyDelay = n.ReplyDelay.Sample(rng)
	if r.ReplyDelay != nil {
		f.ReplyDelay = *r.ReplyDelay
	}
	f.Lost = rng.Float64() < dropRequests
	f.Duplicated = rng.Float64() < n.Duplicate
	f.DuplicateLag = n.RequestDelay.Sample(rng)
	return f
}

// DrawReplyLost draws whether the reply to a request the coordinator has
// just answered is lost, with probability dropReplies; the draw comes from
// the same stream as DrawSend's, in the order the coordinator answers.
func (a *Agent) DrawReplyLost(dropReplies float64) bool {
	return a.rngNet.Float64() < dropReplies
}
