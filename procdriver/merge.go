package procdriver

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
)

// How one mode's history is made from its processes: every child reports
// what its agent did and what it saw the coordinator do, and announces
// each write before it makes it. Only the parent sees every child's
// events, so only it can tell that a grant ended the resource's previous
// generation unrenewed (an expiry no renewal revealed), or that a grant
// is a retried request's answer replayed, already in the history. The
// landings come from the resources' own record, never from a child.

// reported is what one mode's children reported: their events, and the
// writes they announced, by id.
type reported struct {
	events []history.Event
	writes map[uint64]history.Event

	// observed: the mode's contender has its generations numbered in the
	// order the lab saw its grants (realtime.GenerationsObserved). Each
	// process numbers those it saw from 1; the parent numbers them across
	// the processes, in the order their grants reach it (number).
	observed bool
	gens     map[localGen]leasefence.Fence
	last     leasefence.Fence
}

// localGen is a generation as one process numbered it.
type localGen struct {
	agent, life int
	fence       leasefence.Fence
}

// add takes one event a child (of life life) reported, and returns it as
// the history has it: with its generation numbered across the processes.
func (r *reported) add(e history.Event, life int) (history.Event, error) {
	r.number(&e, life)
	if !e.Kind.IsWrite() || e.Kind == history.CommitRefused {
		r.events = append(r.events, e)
		return e, nil
	}
	id, err := strconv.ParseUint(e.RequestID, 10, 64)
	if err != nil {
		return e, fmt.Errorf("procdriver: a write announced with no id: %w", err)
	}
	if r.writes == nil {
		r.writes = make(map[uint64]history.Event)
	}
	r.writes[id] = e
	return e, nil
}

// number gives an observed generation its number across the processes: a
// grant the next one, and every later event of the same process and lease
// the grant's. A process reports a grant before anything else of its
// lease, and the lease's events carry its agent and fence.
func (r *reported) number(e *history.Event, life int) {
	if !r.observed || e.Fence == 0 {
		return
	}
	k := localGen{agent: e.Agent, life: life, fence: e.Fence}
	g, ok := r.gens[k]
	if !ok && e.Kind == history.Granted {
		if r.gens == nil {
			r.gens = make(map[localGen]leasefence.Fence)
		}
		r.last++
		g, ok = r.last, true
		r.gens[k] = g
	}
	if ok {
		e.Fence = g
	}
}

// landings are the landing events of the resources' records (by
// resource index): in each resource's order, each at the instant the
// resource stamped it with, never before the write before it. Writes that
// landed after end are not in the history, which ends where the run did.
func (r *reported) landings(records [][]realtime.Landing, names []string, end time.Duration) ([]history.Event, error) {
	var out []history.Event
	for ri, record := range records {
		var last time.Duration
		for _, l := range record {
			e, ok := r.writes[l.ID]
			if !ok {
				return out, fmt.Errorf("procdriver: %s records write %d, which no process announced", names[ri], l.ID)
			}
			last = max(last, l.At)
			if last > end {
				break
			}
			e.At = last
			out = append(out, e)
		}
	}
	return out, nil
}

// history is the mode's history: the children's events and the landings,
// in the order of their instants (grants in the order of their fences),
// with the coordinator's side made whole.
func (r *reported) history(landed []history.Event, h *history.Header) []history.Event {
	events := append(slices.Clone(r.events), landed...)
	realtime.InFenceOrder(events)
	// Stable: events of one instant keep the order they were reported in.
	slices.SortStableFunc(events, func(a, b history.Event) int { return cmp.Compare(a.At, b.At) })
	events = coordinatorSide(h, events)
	for i := range events {
		events[i].Seq = uint64(i + 1)
	}
	return events
}

// generation is the newest lease generation of a resource, as the history
// knows it, with those the history took for expired before it.
type generation struct {
	realtime.Newest
	guessed realtime.GuessedEnds
}

// release names the generation a release request was sent for.
type release struct {
	agent, resource int
	fence           leasefence.Fence
}

// coordinatorSide walks the events of a history under header h in order
// and keeps the coordinator's events that tell something new: a grant
// replayed to a retried request is dropped (it minted nothing), a grant
// of a resource whose generation had not ended is preceded by that
// generation's expiry unless the lab recorded it late
// (realtime.GuessedEnds.Grant), and an extension
// or expiry of a generation the history has moved past, or already ended,
// is dropped; a refusal for lock-delay ends the live generation as an
// expiry (realtime.RefusalEnds). A release of such a generation is judged by the rule the
// in-process runner follows (realtime.GuessedEnds): one that reached the
// coordinator, by the record, no later than the grant that took its
// generation for expired is what let it go, and replaces that expiry;
// any other is the coordinator's claim, kept for the checker. A child
// reports a release when its answer is back; by the record, it reached
// the coordinator at its send plus the network delay it was given.
func coordinatorSide(h *history.Header, events []history.Event) []history.Event {
	resources := len(h.Resources)
	gens := make([]generation, resources)
	arrivals := make(map[release]time.Duration)
	out := make([]history.Event, 0, len(events))
	for _, e := range events {
		if e.Resource < 0 || e.Resource >= resources {
			out = append(out, e)
			continue
		}
		cur := &gens[e.Resource]
		current := cur.Known && cur.Fence == e.Fence
		switch e.Kind {
		case history.RequestSent:
			if e.Request == history.RequestRelease {
				arrivals[release{e.Agent, e.Resource, e.Fence}] = e.At + e.Dur
			}
		case history.Granted:
			if current {
				continue
			}
			takeover, expiry, expired := cur.guessed.Grant(h, e.Mode, e.Resource, cur.Newest, e.Fence, e.At, len(out))
			if expired {
				out = append(out, expiry)
			}
			if takeover {
				cur.Newest = realtime.Newest{Known: true, Agent: e.Agent, Fence: e.Fence, Incarnation: e.Incarnation, Deadline: e.Deadline}
			}
		case history.Extended:
			if !current || cur.Ended {
				continue
			}
			cur.Deadline = e.Deadline
		case history.Denied:
			if expiry, ok := realtime.RefusalEnds(e.Reason, e.Resource, cur.Newest); ok {
				cur.Ended = true
				expiry.At, expiry.Mode = e.At, e.Mode
				out = append(out, expiry)
			}
		case history.Expired:
			if !current || cur.Ended {
				continue
			}
			cur.Ended = true
			e.Deadline = cur.Deadline
		case history.Released:
			if current && !cur.Ended {
				cur.Ended = true
				break
			}
			arrived, sent := arrivals[release{e.Agent, e.Resource, e.Fence}]
			if sent && cur.guessed.Released(out, e.Fence, e.Incarnation, arrived) {
				continue
			}
		}
		out = append(out, e)
	}
	// A release that replaced a guessed expiry is dated earlier than the
	// grant it came before. Stable: events of one instant keep their order.
	slices.SortStableFunc(out, func(a, b history.Event) int { return cmp.Compare(a.At, b.At) })
	return out
}
