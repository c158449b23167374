package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// bareCrowd is the crowd the simulator benchmarks run, as a bare event loop:
// the same agents with the same random streams, the same timers (think,
// acquire, its reply, the validity check, the stall, the work gap, renewal
// at half the TTL, release, the coordinator's expiry) and the same uniform
// picks of a resource, with no library, no history and no checker: a lease
// is three integers in a slice, a write is a comparison, an event is a
// count. It is the ceiling of the simulator's speed on this load, measured
// beside it in one run (BenchmarkSimulatorAgents/.../impl=bare).
//
// It counts an event wherever the simulator emits one for the same step,
// so its events/op come close to the simulator's (TestBareLoopIsTheCrowd);
// both also report virtual-s/s, which does not depend on counting alike.
type bareCrowd struct {
	sc     *spec.Scenario
	now    time.Duration
	queue  bareQueue
	seq    uint64
	events uint64
	agents []bareAgent
	leases []bareLease // per resource: the coordinator's newest lease
	floors []uint64    // per resource: the gate's floor
	fence  uint64      // the coordinator's counter

	acquisitions, denials, admitted, refused, renewals, expiries, releases int
}

type bareAgent struct {
	think, stall, net, pick *rand.Rand

	phase              uint8
	gen, renewGen      uint32
	resource           int
	fence              uint64
	sent, until        time.Duration // the acquire's or renewal's send instant; the believed deadline
	replyDelay         time.Duration
	writes             int
	renewing, renewDue bool
}

const (
	bareIdle uint8 = iota
	bareAcquiring
	bareHolding
	bareStalled
)

type bareLease struct {
	holder            int
	fence             uint64
	end               time.Duration
	released, expired bool
}

type bareKind uint8

const (
	bareEnd bareKind = iota
	bareStep
	bareRenew
	bareAcquireArrives
	bareRenewArrives
	bareReleaseArrives
	bareAcquireReply
	bareRenewReply
	bareExpiry
)

type bareTimer struct {
	at    time.Duration
	seq   uint64
	kind  bareKind
	agent int32
	arg   int32
	gen   uint32
	fence uint64
}

// bareQueue is a 4-ary min-heap of timers by (at, seq), the simulator's
// own kind of queue: the fastest plain heap for this load.
type bareQueue []bareTimer

func (t *bareTimer) before(u *bareTimer) bool {
	return t.at < u.at || (t.at == u.at && t.seq < u.seq)
}

func (q *bareQueue) push(t bareTimer) {
	*q = append(*q, t)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !t.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = t
}

func (q *bareQueue) pop() bareTimer {
	h := *q
	top, x := h[0], h[len(h)-1]
	h = h[:len(h)-1]
	*q = h
	if len(h) == 0 {
		return top
	}
	i := 0
	for {
		first := 4*i + 1
		if first >= len(h) {
			break
		}
		m := first
		for c := first + 1; c < min(first+4, len(h)); c++ {
			if h[c].before(&h[m]) {
				m = c
			}
		}
		if !h[m].before(&x) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = x
	return top
}

// newBareCrowd builds the crowd of sc: its agents' streams seeded as the
// simulator seeds them, each agent thinking before its first attempt.
func newBareCrowd(sc *spec.Scenario) *bareCrowd {
	c := &bareCrowd{sc: sc, agents: make([]bareAgent, sc.Agents), leases: make([]bareLease, sc.Resources), floors: make([]uint64, sc.Resources)}
	for i := range c.leases {
		c.leases[i] = bareLease{holder: -1, released: true}
	}
	c.schedule(sc.Duration, bareTimer{kind: bareEnd})
	for i := range c.agents {
		a := &c.agents[i]
		a.think, a.stall, a.net, a.pick = bareStream(sc.Seed, 1, i), bareStream(sc.Seed, 2, i), bareStream(sc.Seed, 3, i), bareStream(sc.Seed, 4, i)
		a.resource = -1
		c.schedule(sc.Agent.Think.Sample(a.think), bareTimer{kind: bareStep, agent: int32(i), gen: a.gen})
	}
	return c
}

// bareStream seeds an agent's stream of one purpose as the agent package
// does.
func bareStream(seed, purpose uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^purpose*0x9e3779b97f4a7c15, uint64(i)+1))
}

func (c *bareCrowd) schedule(at time.Duration, t bareTimer) {
	c.seq++
	t.at, t.seq = at, c.seq
	c.queue.push(t)
}

// run runs the crowd to its end.
func (c *bareCrowd) run() {
	for len(c.queue) > 0 {
		t := c.queue.pop()
		c.now = t.at
		if t.kind == bareEnd {
			return
		}
		c.fire(&t)
	}
}

func (c *bareCrowd) fire(t *bareTimer) {
	a := &c.agents[t.agent]
	switch t.kind {
	case bareStep:
		if t.gen == a.gen {
			c.step(int(t.agent), a)
		}
	case bareRenew:
		if t.gen == a.renewGen {
			c.renewDue(int(t.agent), a)
		}
	case bareAcquireArrives:
		c.acquireArrives(int(t.agent), a)
	case bareRenewArrives:
		c.renewArrives(int(t.agent), a, t.fence)
	case bareReleaseArrives:
		l := &c.leases[t.arg]
		if l.holder == int(t.agent) && l.fence == t.fence && !l.released && !l.expired {
			l.released, l.end = true, c.now
			c.releases++
			c.events++ // Released
		}
	case bareAcquireReply:
		c.acquireReply(int(t.agent), a, t)
	case bareRenewReply:
		c.renewReply(int(t.agent), a, t)
	case bareExpiry:
		l := &c.leases[t.arg]
		if l.fence == t.fence && !l.released && !l.expired && l.end == c.now {
			l.expired = true
			c.expiries++
			c.events++ // Expired
		}
	}
}

// send puts a request on the wire: its delay, then the reply's, drawn as
// the simulator draws a request's fate.
func (c *bareCrowd) send(i int, a *bareAgent, kind bareKind, arg int32, fence uint64) {
	n := &c.sc.Network
	d := n.RequestDelay.Sample(a.net)
	a.replyDelay = n.ReplyDelay.Sample(a.net)
	_, _, _ = a.net.Float64(), a.net.Float64(), n.RequestDelay.Sample(a.net) // loss, duplicate, its lag
	c.events++                                                               // RequestSent
	c.schedule(c.now+d, bareTimer{kind: kind, agent: int32(i), arg: arg, fence: fence})
}

func (c *bareCrowd) step(i int, a *bareAgent) {
	switch a.phase {
	case bareIdle:
		a.gen++
		a.resource = a.pick.IntN(c.sc.Resources)
		a.phase, a.sent = bareAcquiring, c.now
		c.send(i, a, bareAcquireArrives, int32(a.resource), 0)
	case bareHolding:
		c.events++ // CheckPassed or CheckFailed
		if c.now >= a.until {
			c.giveUp(i, a)
			return
		}
		d := c.sc.Agent.Stall.Sample(a.stall)
		a.phase = bareStalled
		c.events++ // StallBegan
		c.schedule(c.now+d, bareTimer{kind: bareStep, agent: int32(i), gen: a.gen})
	case bareStalled:
		c.events++ // StallEnded
		a.phase = bareHolding
		c.write(i, a)
	}
}

func (c *bareCrowd) write(i int, a *bareAgent) {
	c.events++ // CommitAdmitted or CommitRefused
	if a.fence < c.floors[a.resource] {
		c.refused++
		c.giveUp(i, a)
		return
	}
	c.floors[a.resource] = a.fence
	c.admitted++
	a.writes++
	if a.writes >= c.sc.Agent.WritesPerLease {
		r, f := a.resource, a.fence
		c.giveUp(i, a)
		c.send(i, a, bareReleaseArrives, int32(r), f)
		return
	}
	if a.renewDue {
		a.renewDue = false
		c.renewDue(i, a)
	}
	c.schedule(c.now+c.sc.Agent.WorkGap.Sample(a.stall), bareTimer{kind: bareStep, agent: int32(i), gen: a.gen})
}

func (c *bareCrowd) giveUp(i int, a *bareAgent) {
	c.events++ // LeaseAbandoned
	a.renewing, a.renewDue = false, false
	a.renewGen++
	a.gen++
	a.phase = bareIdle
	c.schedule(c.now+c.sc.Agent.Think.Sample(a.think), bareTimer{kind: bareStep, agent: int32(i), gen: a.gen})
}

func (c *bareCrowd) acquireArrives(i int, a *bareAgent) {
	l := &c.leases[a.resource]
	if l.holder >= 0 && !l.released && !l.expired && c.now < l.end {
		c.schedule(c.now+a.replyDelay, bareTimer{kind: bareAcquireReply, agent: int32(i), gen: a.gen, fence: 0, arg: int32(l.end - c.now)})
		return
	}
	c.fence++
	*l = bareLease{holder: i, fence: c.fence, end: c.now + c.sc.TTL}
	c.events++ // Granted
	c.schedule(l.end, bareTimer{kind: bareExpiry, arg: int32(a.resource), fence: c.fence})
	c.schedule(c.now+a.replyDelay, bareTimer{kind: bareAcquireReply, agent: int32(i), gen: a.gen, fence: c.fence})
}

func (c *bareCrowd) acquireReply(i int, a *bareAgent, t *bareTimer) {
	if a.phase != bareAcquiring || t.gen != a.gen {
		return
	}
	if t.fence == 0 {
		c.denials++
		c.events++ // Denied
		a.gen++
		a.phase = bareIdle
		c.schedule(c.now+time.Duration(t.arg), bareTimer{kind: bareStep, agent: int32(i), gen: a.gen})
		return
	}
	c.acquisitions++
	c.events++ // Acquired
	a.gen++
	a.fence, a.writes, a.renewing, a.renewDue = t.fence, 0, false, false
	a.until = a.sent + c.sc.TTL - c.sc.ClockSkew
	a.phase = bareHolding
	c.scheduleRenewal(i, a)
	c.schedule(c.now, bareTimer{kind: bareStep, agent: int32(i), gen: a.gen})
}

func (c *bareCrowd) scheduleRenewal(i int, a *bareAgent) {
	at := max(a.sent+time.Duration(c.sc.Agent.RenewAt*float64(c.sc.TTL)), c.now)
	c.schedule(at, bareTimer{kind: bareRenew, agent: int32(i), gen: a.renewGen})
}

func (c *bareCrowd) renewDue(i int, a *bareAgent) {
	if (a.phase != bareHolding && a.phase != bareStalled) || a.renewing {
		return
	}
	if a.phase == bareStalled {
		a.renewDue = true
		return
	}
	a.renewing, a.sent = true, c.now
	c.send(i, a, bareRenewArrives, int32(a.resource), a.fence)
}

func (c *bareCrowd) renewArrives(i int, a *bareAgent, fence uint64) {
	l := &c.leases[a.resource]
	ok := l.holder == i && l.fence == fence && !l.released && !l.expired && c.now < l.end
	if ok {
		l.end = c.now + c.sc.TTL
		c.events++ // Extended
		c.schedule(l.end, bareTimer{kind: bareExpiry, arg: int32(a.resource), fence: fence})
	}
	var granted uint64
	if ok {
		granted = fence
	}
	c.schedule(c.now+a.replyDelay, bareTimer{kind: bareRenewReply, agent: int32(i), gen: a.renewGen, fence: granted})
}

func (c *bareCrowd) renewReply(i int, a *bareAgent, t *bareTimer) {
	if !a.renewing || t.gen != a.renewGen {
		return
	}
	a.renewing = false
	c.events++ // Renewed or RenewRefused
	if t.fence == 0 {
		if a.phase == bareHolding {
			c.giveUp(i, a)
		}
		return
	}
	c.renewals++
	a.until = a.sent + c.sc.TTL - c.sc.ClockSkew
	c.scheduleRenewal(i, a)
}

// TestBareLoopIsTheCrowd checks that the bare loop is the simulator's crowd
// with the lab taken out: on the same world it makes as many acquisitions,
// denials and admitted writes, and events, within a few percent (their
// random streams part at the first coordinator decision, so not exactly).
func TestBareLoopIsTheCrowd(t *testing.T) {
	for _, w := range []world{{agents: 100, resources: 10, duration: 2 * time.Minute}, {agents: 1000, resources: 100, duration: time.Minute}} {
		sc, err := w.scenario()
		if err != nil {
			t.Fatal(err)
		}
		res, err := harness.Run(t.Context(), sc, harness.RunOptions{Modes: []history.Mode{history.Fenced}})
		if err != nil {
			t.Fatal(err)
		}
		rep := res.Modes[history.Fenced]
		c := newBareCrowd(&sc)
		c.run()
		for _, n := range []struct {
			what      string
			bare, sim float64
		}{
			{"events", float64(c.events), float64(rep.Events)},
			{"acquisitions", float64(c.acquisitions), float64(rep.Acquisitions)},
			{"denials", float64(c.denials), float64(rep.Denials)},
			{"admitted writes", float64(c.admitted), float64(rep.CommitsAdmitted)},
			{"releases", float64(c.releases), float64(rep.Releases)},
		} {
			if n.sim == 0 || math.Abs(n.bare/n.sim-1) > 0.03 {
				t.Errorf("%+v: the bare loop made %.0f %s, the simulator %.0f", w, n.bare, n.what, n.sim)
			}
		}
	}
}
