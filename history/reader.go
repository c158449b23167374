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
	// Stale: it landed after a write of a newer lease generation of the
	// resource (one minted after the writer's) had landed: the writer's
	// generation was no longer the resource's current one. Generations are
	// ordered by when they were minted, not by fence number, so that a
	// fence reissued by a coordinator that lost its counter is judged by
	// its place in the history. A write whose generation the history does
	// not show is judged by its fence against the highest landed.
	Stale bool
	// Reissued: it landed under the resource's current generation, but its
	// fence is not above one an older generation landed: a fence reissued
	// by a restart that lost the counter. It is not stale.
	Reissued bool
	// The floor a refusal names (the gate's highest admitted fence and its
	// holder), or the write a stale write landed under (the newest
	// generation's fence and holder); FloorAgent is -1 if none.
	FloorAgent int32
	FloorFence leasefence.Fence
}

// Reader folds one mode's history, event by event, into lease generations,
// what each holder believes, and the writes at each resource. It is the one
// place that knows what the events mean; the checker, the trace recorder
// and the displays read the run through it. A Reader is not safe for
// concurrent use.
type Reader struct {
	h      *Header
	gens   []Generation
	writes []Write

	latest      []int32 // per resource: its newest generation, or -1
	holding     []int32 // per agent: the generation it believes it holds, or -1
	landed      []landing
	incarnation int32
	refused     int
	forgeries   []Forgeries // per resource
}

// Forgeries is what forgers did at one resource: writes refused, writes
// landed, and landed writes whose claimed fence was above every fence
// landed there before (each moved the floor of a gate that admitted it).
type Forgeries struct {
	Refused, Landed, FloorsMoved int
	high                         leasefence.Fence // the highest fence landed, honest or forged
}

// NewReader returns a Reader for a history with h's participants.
func NewReader(h *Header) *Reader {
	r := &Reader{
		h:       h,
		latest:  make([]int32, len(h.Resources)),
		holding: make([]int32, len(h.Agents)),
		landed:  make([]landing, len(h.Resources)),

		forgeries: make([]Forgeries, len(h.Resources)),
	}
	for i := range r.latest {
		r.latest[i] = -1
		r.landed[i] = landing{highest: fenceMark{by: -1}, highestGen: -1, unplaced: fenceMark{by: -1}, current: -1}
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
	h := r.landed[resource].highest
	return h.fence, h.by
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

// Add folds the next event in. An event the header's CheckEvent refuses
// (one that names no agent or resource where its kind names one, or one the
// header does not list) is not folded in: Add returns the refusal, and
// counts it in Refused, so that nothing it cannot read passes unseen. A
// Decoder never returns such an event.
func (r *Reader) Add(e *Event) error {
	if err := r.h.CheckEvent(e); err != nil {
		r.refused++
		return err
	}
	switch e.Kind {
	case Granted:
		r.gens = append(r.gens, Generation{
			Agent: int32(e.Agent), Resource: int32(e.Resource), Fence: e.Fence, Incarnation: e.Incarnation,
			Granted: e.At, CoordEnd: e.Deadline, Start: -1, BeliefEnd: -1, ActEnd: -1, prev: r.latest[e.Resource],
		})
		r.latest[e.Resource] = int32(len(r.gens) - 1)
	case Acquired:
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
		gi := r.writerGeneration(e)
		w := Write{At: e.At, Agent: int32(e.Agent), Resource: int32(e.Resource), Gen: gi, Fence: e.Fence, FloorAgent: -1}
		if e.Kind == CommitRefused {
			w.Refused, w.FloorAgent, w.FloorFence = true, int32(e.Other), e.OtherFence
		} else {
			r.judge(&w)
		}
		r.writes = append(r.writes, w)
		if gi >= 0 {
			g := &r.gens[gi]
			g.ActEnd = max(g.ActEnd, e.At)
		}
	case ForgeryRefused:
		r.forgeries[e.Resource].Refused++
	case ForgeryLanded:
		f := &r.forgeries[e.Resource]
		f.Landed++
		if e.Fence > max(f.high, r.landed[e.Resource].highest.fence) {
			f.FloorsMoved++
			f.high = e.Fence
		}
	case LeaseAbandoned:
		if gi := r.holding[e.Agent]; gi >= 0 {
			g := &r.gens[gi]
			g.BeliefEnd = min(g.BeliefEnd, e.At)
			g.ActEnd = max(g.ActEnd, g.BeliefEnd)
		}
		r.holding[e.Agent] = -1
	}
	return nil
}

// Forgeries returns what forgers did at resource.
func (r *Reader) Forgeries(resource int) Forgeries { return r.forgeries[resource] }

// Refused returns how many events Add refused.
func (r *Reader) Refused() int { return r.refused }

// landing is what has landed at one resource.
type landing struct {
	highest    fenceMark // the highest fence landed
	highestGen int32     // the generation that landed it, or -1
	unplaced   fenceMark // the highest fence landed by a write of no known generation
	current    int32     // the newest generation that landed a write, or -1
}

// fenceMark is a fence landed and the agent whose write it was (-1, with
// fence 0, for none).
type fenceMark struct {
	fence leasefence.Fence
	by    int32
}

func (m *fenceMark) raise(f leasefence.Fence, by int32) {
	if f >= m.fence {
		m.fence, m.by = f, by
	}
}

// judge decides whether w, a write that landed under generation w.Gen,
// was stale or under a reissued fence, and records it as landed.
func (r *Reader) judge(w *Write) {
	l := &r.landed[w.Resource]
	switch {
	case w.Gen >= 0 && w.Gen < l.current:
		cur := &r.gens[l.current]
		w.Stale, w.FloorAgent, w.FloorFence = true, cur.Agent, cur.Fence
		return
	case w.Fence < l.unplaced.fence || w.Gen < 0 && w.Fence < l.highest.fence:
		// One of the two writes has no generation to place it by: the
		// fences decide.
		f := l.unplaced
		if w.Gen < 0 {
			f = l.highest
		}
		w.Stale, w.FloorAgent, w.FloorFence = true, f.by, f.fence
		return
	}
	w.Reissued = w.Gen >= 0 && l.highest.fence > 0 && w.Fence <= l.highest.fence && l.highestGen != w.Gen
	if w.Gen < 0 {
		l.unplaced.raise(w.Fence, w.Agent)
	}
	l.current = max(l.current, w.Gen)
	if w.Fence >= l.highest.fence {
		l.highestGen = w.Gen
	}
	l.highest.raise(w.Fence, w.Agent)
}

// writerGeneration returns the generation a write event names (its
// incarnation, resource and fence), or else the one its agent believes it
// holds, or -1.
func (r *Reader) writerGeneration(e *Event) int32 {
	gi := r.holding[e.Agent]
	if gi >= 0 {
		g := &r.gens[gi]
		if g.Resource == int32(e.Resource) && g.Fence == e.Fence && g.Incarnation == e.Incarnation {
			return gi // the common case, and no search
		}
	}
	if found := r.Find(e.Incarnation, e.Resource, e.Fence); found >= 0 {
		return found
	}
	if gi >= 0 && (r.gens[gi].Resource != int32(e.Resource) || r.gens[gi].Fence != e.Fence) {
		return -1
	}
	return gi
}

// Incarnation returns the coordinator incarnation in force.
func (r *Reader) Incarnation() int32 { return r.incarnation }

// LastWrite returns the write the last write event added.
func (r *Reader) LastWrite() *Write { return &r.writes[len(r.writes)-1] }
