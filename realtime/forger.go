package realtime

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// Forgers are writers with no lease. Each presents, with every write, a
// proof it made up (spec.Forgery), which the store makes (ForgingStore):
// signed with a key of its own, a genuine proof with its claims
// rewritten, an unsigned one, or a genuine proof for another resource.
// All but the last claim the highest fence there is. A forger's write
// goes over the same wire as every other and is judged from the
// resource's record like any other: if it lands, the history has a
// ForgeryLanded; a refusal is a ForgeryRefused. The checker holds the
// fenced mode to none landed.

// genuine keeps the newest proof the coordinator signed for each
// resource: what a forger tampers with or replays, as one that sniffed
// the wire would.
type genuine struct {
	mu     sync.Mutex
	leases []leasefence.Lease // per resource; zero until a grant
}

func (g *genuine) set(ri int, l leasefence.Lease) {
	if l.Proof == "" || ri < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leases == nil {
		g.leases = make([]leasefence.Lease, ri+1)
	}
	for len(g.leases) <= ri {
		g.leases = append(g.leases, leasefence.Lease{})
	}
	g.leases[ri] = l
}

// get returns the newest genuine lease of resource ri, or, with other,
// of any resource but ri.
func (g *genuine) get(ri int, other bool) (leasefence.Lease, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.leases) - 1; i >= 0; i-- {
		if (i == ri) != other && g.leases[i].Proof != "" {
			return g.leases[i], true
		}
	}
	return leasefence.Lease{}, false
}

// forgedFence is the fence every forger but the replayer claims.
const forgedFence = leasefence.Fence(math.MaxUint64)

// startForgers starts the world's forgers, if the scenario has any: each
// writes every half TTL, from a half TTL into the run (staggered), at the
// resources in turn. Their proofs are the store's to make up.
func (w *world) startForgers() error {
	r := w.r
	if len(r.sc.Forgers) == 0 {
		return nil
	}
	fs, ok := r.store.(ForgingStore)
	if !ok {
		return fmt.Errorf("realtime: the scenario has forgers, and store %s makes up no proofs (it is no ForgingStore)", r.store.Name())
	}
	n := len(r.sc.Forgers)
	every := max(r.sc.TTL/2, time.Millisecond)
	for i, kind := range r.sc.Forgers {
		name := spec.ForgerName(i)
		first := every + time.Duration(i)*every/time.Duration(n)
		r.spawn(func(ctx context.Context) {
			for k := 0; sleep(ctx, first+time.Duration(k)*every-r.now()) == nil; k++ {
				if err := w.forgedWrite(ctx, fs, kind, name, (i+k)%len(w.resources)); err != nil {
					w.r.emit(w.mode, history.Event{Kind: history.LibraryError, Agent: -1, Resource: -1, Other: -1,
						Detail: name + ": " + err.Error()})
					return
				}
			}
		})
	}
	return nil
}

// forgedWrite is one write of a forger at resource ri: its landing is
// the resource's to record; a refusal is recorded here.
func (w *world) forgedWrite(ctx context.Context, fs ForgingStore, kind spec.Forgery, name string, ri int) error {
	r := w.r
	claim := leasefence.Token{Holder: name, Resource: r.h.Resources[ri], Fence: forgedFence}
	lease, ok, err := fs.Forge(kind, claim, func(other bool) (leasefence.Lease, bool) { return w.genuine.get(ri, other) })
	if err != nil || !ok {
		return err
	}
	tmpl := history.Event{Kind: history.ForgeryLanded, Agent: -1, Resource: ri, Other: -1, Fence: lease.Token.Fence,
		Outcome: history.Outcome(kind), Detail: name}
	id := w.writes.add(&tmpl)
	wctx, cancel := context.WithTimeout(WithLease(ctx, lease), max(10*r.sc.TTL, writeTimeout))
	defer cancel()
	res := w.resources[ri]
	if w.discipline == history.DisciplineNaive {
		err = res.Write(wctx, lease.Token, id)
	} else {
		err = res.Commit(wctx, lease.Token, id)
	}
	switch {
	case err == nil:
		r.emitLive(w.mode, tmpl) // for a dashboard; the history has it from the record
		return nil
	case ctx.Err() != nil:
		return nil // the run ended
	}
	why, refused := fs.Refusal(err)
	if !refused {
		return fmt.Errorf("write at %s: %w", r.h.Resources[ri], err)
	}
	tmpl.Kind = history.ForgeryRefused
	tmpl.Detail = name + ": " + why
	r.emit(w.mode, tmpl)
	return nil
}
