package history

import (
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Generation is one lease generation: one fence minted by one coordinator
// incarnation for one resource, with the true instants the coordinator
// vouched for it and its holder believed in it and acted on it.
//
// A history holds one per generation, so the record is kept small (88
// bytes, its fields in an order that leaves no padding between them).
type Generation struct {
	Agent, Resource int32
	Fence           leasefence.Fence
	Incarnation     int32
	prev            int32 // the resource's previous generation, or -1

	CoordEnd time.Duration // its coordinator expiry, or the release
	// EarliestEnd is the earliest instant its coordinator expiry can have
	// been: the TTL, on the coordinator's clock, from the first sending
	// of the request whose grant or renewal its holder completed last (the
	// coordinator stamped its expiry no earlier than it got it, and a
	// retry answered from its replay cache has that expiry); -1 until its
	// holder completes the acquire.
	EarliestEnd time.Duration

	// The holder's side; -1 until the holder completes the acquire.
	Start     time.Duration // the holder completed the acquire
	BeliefEnd time.Duration // its belief's end: its deadline, or when it gave up
	ActEnd    time.Duration // its last write attempt, or the end of its belief if later

	// Its writes, as they were folded in: enough for the checker's
	// overlaps at the end, with no record of each write kept.
	firstLanded, lastLanded time.Duration

	Released bool // the coordinator released it
	Expired  bool // its coordinator expiry passed unrenewed
	Forgot   bool // a coordinator restart forgot it

	landed, refused bool // a write under it landed; one was refused
	// What the checker's rules know of it.
	raised bool // its fence is the floor of a gate: a commit under it was admitted, or its push applied
	ended  bool // the coordinator let it go: an expiry or a release the history shows
	// Granted by a lock run in place of the lab's coordinator: CoordEnd is the
	// deadline its library dates from the request's send, not its
	// server's expiry, which can come much later (a ZooKeeper session
	// whose pings go on while its holder stalls keeps the lock).
	guessedEnd bool
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
	// LeaseNotLive: the gate refused it for its lease, not its fence (a
	// refusal whose Outcome says so).
	LeaseNotLive bool
	// Lapsed: it landed at or after the end the history has for its lease:
	// an expiry, a release or a restart that forgot it, recorded before
	// it, or the coordinator's expiry its grant or last extension gave (the
	// lab's coordinator's: a lock run in its place gives the deadline its
	// library dated, which the lock can outlive).
	// Such a write a gate's floor admits until a newer holder's write
	// lands; only a gate that checks the lease refuses it. A stale write
	// is not counted lapsed.
	Lapsed bool
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
//
// Its memory is in proportion to the agents, the resources and the
// generations (a compact record each, with a summary of the generation's
// writes), never to the events: it keeps no record of each write but the
// last, so a history of any length folds in bounded memory per generation.
type Reader struct {
	h      *Header
	gens   generations
	last   Write // the write the last write event added
	nWrite int   // the writes folded in

	latest      []int32 // per resource: its newest generation, or -1
	holding     []int32 // per agent: the generation it believes it holds, or -1
	landed      []landing
	incarnation int32
	refused     int
	forgeries   []Forgeries // per resource
	// Per agent: the acquire and the renewal it sent last, for
	// Generation.EarliestEnd.
	sentAcquire, sentRenew []sent
}

// sent is a request an agent sent: its id, and when it was first sent.
type sent struct {
	id string
	at time.Duration
}

// send records e, a RequestSent. A resend under the same id (a retried
// acquire) keeps the first sending's instant: the coordinator may have
// granted the first, and a replay answers with the expiry that grant was
// stamped with.
func (s *sent) send(e *Event) {
	if s.id == e.RequestID && e.RequestID != "" {
		return
	}
	*s = sent{id: e.RequestID, at: e.At}
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

		sentAcquire: make([]sent, len(h.Agents)),
		sentRenew:   make([]sent, len(h.Agents)),
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

// GenerationCount returns how many generations the history has minted:
// they are numbered from 0 in mint order.
func (r *Reader) GenerationCount() int { return r.gens.len() }

// Generation returns generation i. The pointer stays valid, and sees the
// Reader's later changes to the generation, for the Reader's life.
func (r *Reader) Generation(i int32) *Generation { return r.gens.at(i) }

// WriteCount returns how many writes (landed or refused) have been folded
// in. The Reader keeps no record of them but the last (LastWrite) and each
// generation's summary.
func (r *Reader) WriteCount() int { return r.nWrite }

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
	for i := r.latest[resource]; i >= 0; i = r.gens.at(i).prev {
		g := r.gens.at(i)
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
		r.latest[e.Resource] = r.gens.add(Generation{
			Agent: int32(e.Agent), Resource: int32(e.Resource), Fence: e.Fence, Incarnation: e.Incarnation,
			CoordEnd: e.Deadline, EarliestEnd: -1, Start: -1, BeliefEnd: -1, ActEnd: -1, prev: r.latest[e.Resource],
			guessedEnd: r.h.Contender(e.Mode).Generations != "",
		})
	case Acquired:
		gi := r.Find(e.Incarnation, e.Resource, e.Fence)
		if gi >= 0 {
			g := r.gens.at(gi)
			g.Start, g.BeliefEnd, g.ActEnd = e.At, e.Deadline, e.At
			r.sentFor(g, r.sentAcquire[e.Agent], e.RequestID)
		}
		r.holding[e.Agent] = gi
	case Renewed:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			g := r.gens.at(gi)
			g.BeliefEnd = e.Deadline
			r.sentFor(g, r.sentRenew[e.Agent], e.RequestID)
		}
	case RequestSent:
		switch e.Request {
		case RequestAcquire:
			r.sentAcquire[e.Agent].send(e)
		case RequestRenew:
			r.sentRenew[e.Agent].send(e)
		}
	case Extended:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			r.gens.at(gi).CoordEnd = e.Deadline
		}
	case Released:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			g := r.gens.at(gi)
			g.CoordEnd, g.Released = e.At, true
		}
	case Expired:
		if gi := r.Find(e.Incarnation, e.Resource, e.Fence); gi >= 0 {
			r.gens.at(gi).Expired = true
		}
	case CoordinatorRestarted:
		r.incarnation = e.Incarnation
		for _, gi := range r.latest {
			if gi >= 0 && r.gens.at(gi).Incarnation < e.Incarnation {
				r.gens.at(gi).Forgot = true
			}
		}
	case CommitAdmitted, WriteLanded, CommitRefused:
		gi := r.writerGeneration(e)
		w := Write{At: e.At, Agent: int32(e.Agent), Resource: int32(e.Resource), Gen: gi, Fence: e.Fence, FloorAgent: -1}
		if e.Kind == CommitRefused {
			w.Refused, w.FloorAgent, w.FloorFence = true, int32(e.Other), e.OtherFence
			w.LeaseNotLive = e.Outcome.LeaseNotLive()
		} else {
			r.judge(&w)
			w.Lapsed = !w.Stale && gi >= 0 && r.gens.at(gi).endedBy(w.At)
		}
		r.last = w
		r.nWrite++
		if gi >= 0 {
			r.gens.at(gi).wrote(&w)
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
			g := r.gens.at(gi)
			g.BeliefEnd = min(g.BeliefEnd, e.At)
			g.ActEnd = max(g.ActEnd, g.BeliefEnd)
		}
		r.holding[e.Agent] = -1
	}
	return nil
}

// sentFor raises g's EarliestEnd to the coordinator's TTL from s, the
// request its holder's completion with request id answered, if s is it.
// An answer to a request sent before the last one of its kind (its id
// not the last's) leaves it: the expiry it gave is no earlier.
func (r *Reader) sentFor(g *Generation, s sent, id string) {
	if s.id == "" || s.id != id {
		return
	}
	g.EarliestEnd = max(g.EarliestEnd, s.at+r.h.CoordinatorTTL())
}

// endedBy reports whether the history has g over at instant at: ended by
// an event folded in before (an expiry, a release, a restart that forgot
// it), or past the coordinator expiry its grant or last extension gave,
// unless that is a lock's deadline as its library dated it.
func (g *Generation) endedBy(at time.Duration) bool {
	return g.Lapsed() || !g.guessedEnd && g.CoordEnd > 0 && at >= g.CoordEnd
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
		cur := r.gens.at(l.current)
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
		g := r.gens.at(gi)
		if g.Resource == int32(e.Resource) && g.Fence == e.Fence && g.Incarnation == e.Incarnation {
			return gi // the common case, and no search
		}
	}
	if found := r.Find(e.Incarnation, e.Resource, e.Fence); found >= 0 {
		return found
	}
	if gi >= 0 && (r.gens.at(gi).Resource != int32(e.Resource) || r.gens.at(gi).Fence != e.Fence) {
		return -1
	}
	return gi
}

// Incarnation returns the coordinator incarnation in force.
func (r *Reader) Incarnation() int32 { return r.incarnation }

// LastWrite returns the write the last write event added (the zero Write
// before any). The Write is the Reader's: read it, do not keep it across
// Add.
func (r *Reader) LastWrite() *Write { return &r.last }

// wrote folds write w, under g, into g's summary of its writes.
func (g *Generation) wrote(w *Write) {
	g.ActEnd = max(g.ActEnd, w.At)
	if w.Refused {
		g.refused = true
		return
	}
	if !g.landed {
		g.firstLanded = w.At
	}
	g.lastLanded = w.At
	g.landed = true
}

// genBlock is how many generations one block of a generations holds.
const genBlock = 1 << 10

// generations holds the generations in blocks of genBlock, so that the
// record of a long history grows by a block at a time: no copy of all of
// it when it grows, and no slack of up to its whole size, as an appended
// slice would have; and a pointer to a generation stays valid.
type generations struct {
	blocks [][]Generation
	n      int32
}

func (gs *generations) len() int { return int(gs.n) }

func (gs *generations) at(i int32) *Generation { return &gs.blocks[i/genBlock][i%genBlock] }

// add appends g and returns its index.
func (gs *generations) add(g Generation) int32 {
	if int(gs.n) == len(gs.blocks)*genBlock {
		gs.blocks = append(gs.blocks, make([]Generation, genBlock))
	}
	i := gs.n
	*gs.at(i) = g
	gs.n++
	return i
}
