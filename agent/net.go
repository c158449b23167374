package agent

import (
	"math/rand/v2"
	"time"

	"github.com/leasefence/lab/spec"
)

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

// Pushes draws the fate of the coordinator's pushes of newly minted fences
// to the resource's gate, in the order the fences are minted: one stream
// per run and mode, seeded from the scenario's seed, the same on every
// driver.
type Pushes struct {
	rng  *rand.Rand
	push spec.Push
}

// NewPushes returns the push draws of a run of sc.
func NewPushes(sc *spec.Scenario) *Pushes {
	return &Pushes{rng: rand.New(rand.NewPCG(sc.Seed, 0x9e3779b97f4a7c15)), push: sc.Push}
}

// Draw is the next push's delay, and whether it is lost.
func (p *Pushes) Draw() (delay time.Duration, dropped bool) {
	delay = p.push.Delay.Sample(p.rng)
	return delay, p.rng.Float64() < p.push.Drop
}
