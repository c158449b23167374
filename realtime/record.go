package realtime

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// How a real-time history is kept honest: the runner serialises nothing of
// the system under test. Agents send writes to the gates concurrently,
// and each resource records every write that landed on it, in the same
// operation as the write (Resource.Landings). The history's landings are
// built from that record once the run is over: in the resource's order,
// each at the instant the resource stamped it with. Every other event is
// stamped as it happens. The history is then every event in the order of
// its instant, and only then judged, and handed to the subscribers.

// writes is a mode's registry of the writes sent to its resources: the
// event each would be if it landed, by write id.
type writes struct {
	mu     sync.Mutex
	next   uint64
	events map[uint64]history.Event
}

// add registers a write described by *e, gives *e the write's id as its
// request id (the landing and a refusal of one write carry the same, so
// that the checker sees a write reported both ways), and returns the id.
func (ws *writes) add(e *history.Event) uint64 {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.events == nil {
		ws.events = make(map[uint64]history.Event)
	}
	ws.next++
	e.RequestID = WriteRequestID(ws.next)
	ws.events[ws.next] = *e
	return ws.next
}

// WriteRequestID is the request id of write id in the history: its landing
// and its refusal carry it.
func WriteRequestID(id uint64) string { return strconv.FormatUint(id, 10) }

func (ws *writes) event(id uint64) (history.Event, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	e, ok := ws.events[id]
	return e, ok
}

// landings reads back every resource's record of mode w and returns its
// landing events: in each resource's order, each at the instant the
// resource stamped it with, never earlier than the write before it (a
// resource that stamps before it orders, as etcd's revision does, can
// stamp a later write earlier). Writes that landed after the run ended
// are not in the history, which ends where the run did.
func (w *world) landings(ctx context.Context, end time.Duration) ([]history.Event, error) {
	kind := LandingKind(w.discipline)
	var out []history.Event
	for ri, res := range w.resources {
		record, err := res.Landings(ctx)
		if err != nil {
			return out, fmt.Errorf("realtime: reading back the writes of %s (%s): %w", w.r.h.Resources[ri], w.mode, err)
		}
		var last time.Duration
		for _, l := range record {
			e, ok := w.writes.event(l.ID)
			if !ok {
				return out, fmt.Errorf("realtime: %s (%s) records write %d, which was never sent", w.r.h.Resources[ri], w.mode, l.ID)
			}
			last = max(last, l.At)
			if last > end {
				break
			}
			if e.Kind != history.ForgeryLanded { // a forger's write is the forger's
				e.Kind = kind
			}
			e.At, e.Mode = last, w.mode
			out = append(out, e)
		}
	}
	return out, nil
}

// assemble builds each mode's history from what was emitted and what the
// resources recorded, has the checker judge it, and hands it to the
// subscribers. It runs once, after every goroutine of the run ended.
func (r *Runner) assemble() error {
	ctx, cancel := context.WithTimeout(context.Background(), max(10*r.timeout, writeTimeout))
	defer cancel()
	var errs []error
	for _, w := range r.worlds {
		landed, err := w.landings(ctx, r.wall)
		if err != nil {
			errs = append(errs, err)
		}
		events := append(r.emitted[w.mode], landed...)
		InFenceOrder(events)
		// Stable: events of one instant keep the order they happened in.
		slices.SortStableFunc(events, func(a, b history.Event) int { return cmp.Compare(a.At, b.At) })
		for i := range events {
			events[i].Seq = uint64(i + 1)
			r.checkers[w.mode].Add(&events[i])
			for _, s := range r.subs {
				s.Event(events[i])
			}
		}
		r.emitted[w.mode] = nil
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// InFenceOrder makes the grants' instants follow their fences within each
// coordinator incarnation: fences are minted in order, so of two grants
// stamped against their fences' order one stamp is off. The later fence's
// stamp may be early (a coordinator that stamps after it minted, as
// etcdlease does once its transaction returns): it is moved after the
// lower fence's, but never past the instant its holder had it (its
// Acquired). Else the lower fence's stamp may be late (a process paused
// between its lock's return and the record): it is moved before the
// higher's, but never before its request was sent. When neither fits (a
// run of replies that came back out of their fences' order, or a counter
// that went back, as after a Redis failover to a replica that never saw
// the last fences), the record keeps it as it happened: the checker holds
// a fence to those minted on other resources only where the record proves
// they came first, and so finds the counter that went back.
func InFenceOrder(events []history.Event) {
	type token struct {
		agent, resource int
		fence           leasefence.Fence
		incarnation     int32
	}
	var grants []*history.Event
	had := make(map[token]time.Duration)
	sent := make(map[string]time.Duration)
	for i := range events {
		e := &events[i]
		switch e.Kind {
		case history.Granted:
			grants = append(grants, e)
		case history.Acquired:
			t := token{e.Agent, e.Resource, e.Fence, e.Incarnation}
			if at, ok := had[t]; !ok || e.At < at {
				had[t] = e.At
			}
		case history.RequestSent:
			if e.RequestID != "" {
				sent[e.RequestID] = e.At
			}
		}
	}
	slices.SortStableFunc(grants, func(a, b *history.Event) int {
		return cmp.Or(cmp.Compare(a.Incarnation, b.Incarnation), cmp.Compare(a.Fence, b.Fence))
	})
	for i := 1; i < len(grants); i++ {
		g, prev := grants[i], grants[i-1]
		if prev.Incarnation != g.Incarnation || g.At > prev.At {
			continue
		}
		if at, ok := had[token{g.Agent, g.Resource, g.Fence, g.Incarnation}]; !ok || prev.At+1 <= at {
			g.At = prev.At + 1
			continue
		}
		earliest, known := sent[prev.RequestID]
		before := i < 2 || grants[i-2].Incarnation != prev.Incarnation || grants[i-2].At < g.At-1
		if (!known || earliest <= g.At-1) && before {
			prev.At = g.At - 1
		}
	}
}
