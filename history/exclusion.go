package history

import (
	"strconv"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// MutualExclusion finds, in one mode's events in history order, every
// grant the lock made while an earlier lease on the same resource had
// neither been released nor expired: a Granted event at a true instant
// before the coordinator expiry the previous generation's Granted (or
// latest Extended) event carries, with no Released event of it, no
// Expired event of it before the grant (a renewal the lock refused as
// expired), and no CoordinatorRestarted event between the two grants (a
// restart forgets every lease: the scenario's fault, which ended the
// earlier lease, not the lock's lie). The expiry is the one the history has: the server's where the
// runner could read it, the lease's own Deadline for a contender lock
// (realtime.Contender). It is the lock's own fault, whatever its holders
// did. A grant a library's lock made before the resource's newest, which
// the lab recorded late (Header.LateGrant), took over nothing; the newest
// took over from it, and is a violation if recorded before the late
// lease's Deadline. It returns the count and up to MaxCounterexamples of them: what a
// Checker's Report counts as MutualExclusionViolations.
//
// In a real-time history (a header's Backend other than the simulator's)
// the runner may date a grant when its reply came back, and a server's
// expiry from then: late, each by its own call's time on the wire. So the
// rule judges a grant by the earliest its predecessor can have expired,
// its expiry less the time from the arrival of the request that won it
// to its record. The request arrived no earlier than it was sent
// (RequestSent, by RequestID; for a renewal, the renewal's request) plus
// the network delay the event states (Dur): the server cannot have acted
// before that, so the delay on the way there is no uncertainty and is not
// forgiven. Of a request sent more than once, the copy that can have
// arrived first counts. A violation is a grant recorded before any instant
// the earlier lease can have ended, never one a slow reply made look
// early.
func MutualExclusion(h *Header, events []Event) (int, []Counterexample) {
	x := newExclusion(h)
	for i := range events {
		x.add(&events[i])
	}
	return x.n, x.cx
}

// exclusion is the mutual-exclusion rule's fold: per resource, the newest
// grant's lease and what the history has said of its end.
type exclusion struct {
	h *Header
	// prev is by the header's resource index: every event reads it.
	prev []exclusiveLease
	n    int
	cx   []Counterexample
	// takeovers counts the grants of a resource whose earlier lease had
	// not been released: the grants that put exclusion to the test.
	takeovers int
	// real: the history's times are the runner's records of replies, not
	// the server's own instants; then sent holds the earliest instant
	// each pending acquire (by request id) and renewal (by resource and
	// fence) can have reached the server.
	real    bool
	sent    map[string]time.Duration
	renewed map[renewKey]time.Duration
}

type renewKey struct {
	resource int
	fence    leasefence.Fence
}

type exclusiveLease struct {
	granted   bool // a grant on the resource has been seen
	agent     int
	fence     leasefence.Fence
	at        time.Duration // the grant's record
	end       time.Duration
	released  bool
	expiredAt time.Duration // when the lock said it expired; -1 for never
}

func newExclusion(h *Header) *exclusion {
	return &exclusion{h: h, prev: make([]exclusiveLease, len(h.Resources)), real: !Simulated(h.Backend),
		sent: make(map[string]time.Duration), renewed: make(map[renewKey]time.Duration)}
}

func (x *exclusion) name(i int) string {
	if i < 0 || i >= len(x.h.Agents) {
		return ""
	}
	return x.h.Agents[i]
}

// earliestEnd is the earliest instant a lease recorded at at, with the
// expiry end, can have ended: end, less (in a real-time history) the time
// since the request that won it can have arrived.
func (x *exclusion) earliestEnd(end, at, arrived time.Duration, ok bool) time.Duration {
	if !x.real || !ok || arrived > at {
		return end
	}
	return end - (at - arrived)
}

// arrived keeps in m[k] the earliest instant a request can have reached
// the server: of every copy sent, its send plus its network delay.
func arrived[K comparable](m map[K]time.Duration, k K, e *Event) {
	at := e.At + max(e.Dur, 0)
	if was, seen := m[k]; !seen || at < was {
		m[k] = at
	}
}

// lease returns the resource's record, nil before its first grant (and for
// an event that names no resource).
func (x *exclusion) lease(resource int) *exclusiveLease {
	if resource < 0 || resource >= len(x.prev) || !x.prev[resource].granted {
		return nil
	}
	return &x.prev[resource]
}

// violation counts a grant to agent at instant at (generation fence) while
// other's lease (generation otherFence) ran until end.
func (x *exclusion) violation(at time.Duration, resource, agent int, fence leasefence.Fence, other int, otherFence leasefence.Fence, end time.Duration, note string) {
	x.n++
	if len(x.cx) >= MaxCounterexamples || resource < 0 || resource >= len(x.h.Resources) {
		return
	}
	x.cx = append(x.cx, Counterexample{Kind: MutualExclusionViolation, AtMS: ms(at), Resource: x.h.Resources[resource],
		Holder: x.name(agent), Fence: fence, Other: x.name(other), OtherFence: otherFence, UntilMS: ms(end),
		Detail: "granted to " + x.name(agent) + " at " + FormatDuration(at) + " while " + x.name(other) +
			"'s lease (generation " + strconv.FormatUint(uint64(otherFence), 10) + note + ") was neither released nor expired: it ran until " + FormatDuration(end)})
}

// add folds in the next event of the mode.
func (x *exclusion) add(e *Event) {
	p := x.lease(e.Resource)
	mine := p != nil && p.fence == e.Fence
	switch e.Kind {
	case RequestSent:
		if !x.real {
			return
		}
		switch e.Request {
		case RequestAcquire:
			arrived(x.sent, e.RequestID, e)
		case RequestRenew:
			arrived(x.renewed, renewKey{e.Resource, e.Fence}, e)
		}
	case Denied, AcquireAbandoned:
		delete(x.sent, e.RequestID) // the request won nothing: forget it
	case Granted:
		if p != nil && x.h.LateGrant(e.Mode, e.Fence, p.fence) {
			// Made before p and recorded after it: p's grant is the one
			// that took over, and it is judged against this lease's end
			// as the lock stated it (its Deadline, not discounted by a
			// record that came late), which no release can have
			// preceded: its holder records the grant before it releases.
			delete(x.sent, e.RequestID)
			if e.Deadline > p.at {
				x.violation(p.at, e.Resource, p.agent, p.fence, e.Agent, e.Fence, e.Deadline, ", made before it and recorded late,")
			}
			return
		}
		if p != nil && !p.released {
			x.takeovers++
		}
		if p != nil && !p.released && p.end > e.At && (p.expiredAt < 0 || p.expiredAt >= e.At) {
			x.violation(e.At, e.Resource, e.Agent, e.Fence, p.agent, p.fence, p.end, "")
		}
		sent, ok := x.sent[e.RequestID]
		delete(x.sent, e.RequestID)
		if p != nil {
			delete(x.renewed, renewKey{e.Resource, p.fence})
		}
		if uint(e.Resource) >= uint(len(x.prev)) {
			return // a resource the header does not name: no record to keep
		}
		// The resource's record is reused: one a resource, not one a grant.
		x.prev[e.Resource] = exclusiveLease{granted: true, agent: e.Agent, fence: e.Fence, at: e.At, end: x.earliestEnd(e.Deadline, e.At, sent, ok), expiredAt: -1}
	case Extended:
		if mine {
			k := renewKey{e.Resource, e.Fence}
			sent, ok := x.renewed[k]
			delete(x.renewed, k)
			p.end = max(p.end, x.earliestEnd(e.Deadline, e.At, sent, ok))
		}
	case Released:
		if mine {
			p.released = true
		}
	case Expired:
		if mine && p.expiredAt < 0 {
			p.expiredAt = e.At
		}
	case CoordinatorRestarted:
		for i := range x.prev {
			if l := &x.prev[i]; l.granted && l.expiredAt < 0 {
				l.expiredAt = e.At // forgotten: ended as an expiry ends it
			}
		}
	}
}
