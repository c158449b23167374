package history

import (
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Generation is one lease generation: one fence minted by one coordinator
// incarnation for one resource, with the true instants the coordinator
// vouched for it and its holder believed in it and acted on it.
type Generation struct {
	Agent, Resource int32
	Fence           leasefence.Fence
	Incarnation     int32

	Granted  time.Duration // the coordinator minted it
	CoordEnd time.Duration // its coordinator expiry, or the release
	Released bool          // the coordinator released it
	Expired  bool          // its coordinator expiry passed unrenewed
	Forgot   bool          // a coordinator restart forgot it

	// The holder's side; -1 until the holder completes the acquire.
	Start     time.Duration // the holder completed the acquire
	BeliefEnd time.Duration // its belief's end: its deadline, or when it gave up
	ActEnd    time.Duration // its last write attempt, or the end of its belief if later

	prev int32 // the resource's previous generation, or -1
}

// Lapsed reports whether the coordinator no longer vouches for g.
func (g *Generation) Lapsed() bool { return g.Expired || g.Released || g.Forgot }

// Believed reports whether g's holder ever completed the acquire.
func (g *Generation) Believed() bool { return g.Start >= 0 }

// Acting returns the end of the span in which g's holder acted as holder:
// from Start to the later of its belief's end and its last write.
func (g *Generation) Acting() time.Duration { return max(g.BeliefEnd, g.ActEnd) }

// Write is one write attempt at a resource, as the resource recorded it.
type Write struct {
	At                   time.Duration
	Agent, Resource, Gen int32 // Gen: the writer's generation, or -1
	Fence                leasefence.Fence
	Refused              bool // the gate refused it
	// Stale: it landed although a write of a higher fence had landed
	// before it.
	Stale bool
	// The floor a refusal names (the gate's highest admitted fence and its
	// holder), or the one a stale write landed under (the highest fence
	// landed before it); FloorAgent is -1 if none.
	FloorAgent int32
	FloorFence leasefence.Fence
}

// Reader folds one mode's history, event by event, into lease generations,
// what each holder believes, and the writes at each resource. It is the one
// place that knows what the events mean; the checker, the trace recorder
// and the displays read the run through it. A Reader is not safe for
// concurrent use.
type Reader struct {
	gens   []Generation
	writes []Write

	latest      []int32 // per resource: its newest generation, or -1
	holding     []int32 // per agent: the generation it believes it holds, or -1
	maxLanded   []leasefence.Fence
	maxBy       []int32
	incarnation int32
}

// NewReader returns a Reader for a history with h's participants.
func NewReader(h *Header) *Reader {
	r := &Reader{
		latest:    make([]int32, len(h.Resources)),
		holding:   make([]int32, len(h.Agents)),
		maxLanded: make([]leasefence.Fence, len(h.Resources)),
		maxBy:     make([]int32, len(h.Resources)),
	}
	for i := range r.latest {
		r.latest[i], r.maxBy[i] = -1, -1
	}
	for i := range r.holding {
		r.holding[i] = -1
	}
	return r
}

// Generations returns the generations in mint order. The slice is the
// Reader's: read it, do not keep it across Add.
func (r *Reader) Generations() []Generation { return r.gens }

// Generation returns generation i.
func (r *Reader) Generation(i int32) *Generation { return &r.gens[i] }

// Writes returns the writes in the order they happened. The slice is the
// Reader's: read it, do not keep it across Add.
func (r *Reader) Writes() []Write { return r.writes }

// Holding returns the generation agent believes it holds, or -1.
func (r *Reader) Holding(agent int) int32 {
	if agent < 0 || agent >= len(r.holding) {
		return -1
	}
	return r.holding[agent]
}

// Latest returns the newest generation minted for resource, or -1.
func (r *Reader) Latest(resource int) int32 {
	if resource < 0 || resource >= len(r.latest) {
		return -1
	}
	return r.latest[resource]
}

// Floor returns the highest fence landed at resource and the agent whose
// write it was (-1 when nothing landed).
func (r *Reader) Floor(resource int) (leasefence.Fence, int32) {
	return r.maxLanded[resource], r.maxBy[resource]
}

// Find returns the generation (incarnation, resource, fence), or -1.
func (r *Reader) Find(incarnation int32, resource int, fence leasefence.Fence) int32 {
	if resource < 0 || resource >= len(r.latest) {
		return -1
	}
	for i := r.latest[resource]; i >= 0; i = r.gens[i].prev {
		g := &r.gens[i]
		if g.Fence == fence && g.Incarnation == incarnation {
			return i
		}
		if g.Incarnation < incarnation {
			break
		}
	}
	return -1
}

// Add folds the next event in. Events naming agents or resources outside
// the header are ignored (a Decoder never returns one).
func (r *Reader) Add(e *Event) {
	if e.Agent >= len(r.holding) || e.Resource >= len(r.latest) {
		return
	}
	switch e.Kind {
	case Granted:
		if e.Resource < 0 || e.Agent < 0 {
			return
		}
		r.gens = append(r.gens, Generation{
			Agent: int32(e.Agent), Resource: int32(e.Resource), Fence: e.Fence, Incarnation: e.Incarnation,
			Granted: e.At, CoordEnd: e.Deadline, Start: -1, BeliefEnd: -1, ActEnd: -1, prev: r.latest[e.Resource],
		})
		r.latest[e.Resource] = int32(len(r.gens) - 1)
	case Acquired:
		if e.Agent < 0 {
			return
		}
		gi := r.Find(e.Incarnation, e.Resource, e.Fence)
		if gi >= 0 {
			g := &r.gens[gi]
			g.Start, g.BeliefEnd, g.ActEnd = e.At, e.Deadline, e.At
		}
		r.holding[e.Agent] = gi
	case Renewed:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			r.gens[gi].BeliefEnd = e.Deadline
		}
	case Extended:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			r.gens[gi].CoordEnd = e.Deadline
		}
	case Released:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			g := &r.gens[gi]
			g.CoordEnd, g.Released = e.At, true
		}
	case Expired:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			r.gens[gi].Expired = true
		}
	case CoordinatorRestarted:
		r.incarnation = e.Incarnation
		for _, gi := range r.latest {
			if gi >= 0 && r.gens[gi].Incarnation < e.Incarnation {
				r.gens[gi].Forgot = true
			}
		}
	case CommitAdmitted, WriteLanded, CommitRefused:
		if e.Agent < 0 || e.Resource < 0 {
			return
		}
		gi := r.holding[e.Agent]
		w := Write{At: e.At, Agent: int32(e.Agent), Resource: int32(e.Resource), Gen: gi, Fence: e.Fence, FloorAgent: -1}
		if e.Kind == CommitRefused {
			w.Refused, w.FloorAgent, w.FloorFence = true, int32(e.Other), e.OtherFence
		} else if e.Fence < r.maxLanded[e.Resource] {
			w.Stale, w.FloorAgent, w.FloorFence = true, r.maxBy[e.Resource], r.maxLanded[e.Resource]
		} else {
			r.maxLanded[e.Resource], r.maxBy[e.Resource] = e.Fence, int32(e.Agent)
		}
		r.writes = append(r.writes, w)
		if gi >= 0 {
			g := &r.gens[gi]
			g.ActEnd = max(g.ActEnd, e.At)
		}
	case LeaseAbandoned:
		if e.Agent < 0 {
			return
		}
		if gi := r.holding[e.Agent]; gi >= 0 {
			g := &r.gens[gi]
			g.BeliefEnd = min(g.BeliefEnd, e.At)
			g.ActEnd = max(g.ActEnd, g.BeliefEnd)
		}
		r.holding[e.Agent] = -1
	}
}

// Incarnation returns the coordinator incarnation in force.
func (r *Reader) Incarnation() int32 { return r.incarnation }

// LastWrite returns the write the last write event added.
func (r *Reader) LastWrite() *Write { return &r.writes[len(r.writes)-1] }
