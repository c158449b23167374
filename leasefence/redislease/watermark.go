package redislease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/leasefence/lab/leasefence"
)

// ErrRewound: Redis held a fence counter or a gate's floor below what this
// process had already seen it hold: a failover promoted a replica that
// missed the last writes, or a restart lost them. The concrete value is a
// Rewind, which a Watermark records.
var ErrRewound = errors.New("redislease: Redis went back below what this process saw")

// Watermark is a process's memory of the highest fence each fence counter
// has issued and the floor each gate has admitted, kept outside Redis, so
// that it survives what Redis forgets in a failover. Give the same
// Watermark to the Coordinator (Options.Watermark) and the Gates
// (GateOptions.Watermark) of one process:
//
//   - Acquire never mints a fence at or below the highest fence this
//     process has seen on the counter (issued, or admitted at a gate): a
//     counter that went back moves past it, in the same script, and the
//     rewind is recorded. Fences issued by other processes that this one
//     never saw can still be issued again; their gates catch them
//     (below).
//   - A Gate that finds its floor in Redis below the floor it last saw
//     puts the floor back first, then judges: a stale holder whose fence
//     is above the rewound floor but below the floor seen is refused
//     (*leasefence.StaleFenceError, logged), and a fence issued again
//     under another holder meets a *leasefence.TokenConflictError, instead
//     of landing a stale write. The rewind is recorded.
//
// The memory is the process's: a process that restarts starts with an
// empty Watermark. A Watermark is safe for concurrent use; a nil
// *Watermark remembers nothing.
type Watermark struct {
	mu      sync.Mutex
	fences  map[string]leasefence.Fence // counter key -> highest fence seen
	floors  map[string]leasefence.Token // floor key -> highest floor seen
	rewinds []Rewind                    // the newest maxRewinds
	count   uint64
}

// maxRewinds is how many rewinds a Watermark keeps.
const maxRewinds = 64

// NewWatermark returns an empty Watermark.
func NewWatermark() *Watermark {
	return &Watermark{fences: map[string]leasefence.Fence{}, floors: map[string]leasefence.Token{}}
}

// Rewind is one finding of Redis below what the process had seen. It is an
// error that matches ErrRewound.
type Rewind struct {
	Key   string           // the Redis key: a fence counter or a gate's floor
	Found leasefence.Fence // what Redis held (0: nothing)
	Seen  leasefence.Fence // what this process had seen it hold
	// Repaired: Redis was moved back to at least Seen (the counter past
	// it, the floor to the token seen) before anything was decided on it.
	Repaired bool
}

func (r Rewind) Error() string {
	return fmt.Sprintf("redislease: %s held %d, below %d that this process saw (a failover or a restart lost writes); put back: %v", r.Key, r.Found, r.Seen, r.Repaired)
}

// Is reports whether target is ErrRewound.
func (r Rewind) Is(target error) bool { return target == ErrRewound }

// Fence is the highest fence seen on the counter of prefix ("" for
// DefaultPrefix).
func (w *Watermark) Fence(prefix string) leasefence.Fence {
	k, err := newKeys(prefix)
	if err != nil {
		return 0
	}
	return w.fence(k.counter())
}

// Rewinds returns the rewinds found, oldest first (the newest 64), and how
// many were ever found.
func (w *Watermark) Rewinds() ([]Rewind, uint64) {
	if w == nil {
		return nil, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Rewind(nil), w.rewinds...), w.count
}

func (w *Watermark) fence(counter string) leasefence.Fence {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fences[counter]
}

// sawFence notes that the counter issued f.
func (w *Watermark) sawFence(counter string, f leasefence.Fence) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fences[counter] = max(w.fences[counter], f)
}

// sawFloor notes t as a floor of the gate whose floor key is floorKey, and
// its fence as issued by counter.
func (w *Watermark) sawFloor(counter, floorKey string, t leasefence.Token) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.Fence > w.floors[floorKey].Fence {
		w.floors[floorKey] = t
	}
	w.fences[counter] = max(w.fences[counter], t.Fence)
}

// floor is the highest floor seen for floorKey. Read it before reading
// the floor from Redis: every floor it holds was in Redis before it was
// noted here, and a floor in Redis only rises, so a floor read afterwards
// below it was lost, not merely read before another writer raised it.
func (w *Watermark) floor(floorKey string) leasefence.Token {
	if w == nil {
		return leasefence.Token{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.floors[floorKey]
}

// floorLost reports whether Redis's floor (present or not), read after
// seen was taken from the watermark, is below seen.
func floorLost(seen, floor leasefence.Token, present bool) bool {
	return seen.Fence > 0 && (!present || floor.Fence < seen.Fence)
}

func (w *Watermark) record(r Rewind) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count++
	if len(w.rewinds) == maxRewinds {
		w.rewinds = append(w.rewinds[:0], w.rewinds[1:]...)
	}
	w.rewinds = append(w.rewinds, r)
}

// minted notes a grant of fence f, for which the counter drew drawn, by a
// coordinator that had seen fences up to seen: a draw at or below seen is
// a counter that went back, which the script moved past.
func (c *Coordinator) minted(seen, f, drawn leasefence.Fence) {
	if seen > 0 && drawn <= seen {
		c.watermark.record(Rewind{Key: c.keys.counter(), Found: drawn - 1, Seen: seen, Repaired: f > seen})
	}
	c.watermark.sawFence(c.keys.counter(), f)
}

// restoreFloor puts the floor seen back in Redis, which holds floor (the
// zero Token: none), in one script that only ever raises it, and records
// the rewind. The caller judges again on the restored floor.
func (g *Gate) restoreFloor(ctx context.Context, floor, seen leasefence.Token) error {
	res, _, err := g.runAdmit(ctx, seen)
	if err != nil {
		return fmt.Errorf("redislease: putting back the floor %v of %q that Redis lost: %w", seen, g.resource, err)
	}
	r := reply(res)
	// "admitted", or refused because another writer raised the floor in
	// the meantime: either way it is at or above seen now.
	if r.str(0) == "" && r.err != nil {
		return r.err
	}
	g.watermark.record(Rewind{Key: g.floorKey, Found: floor.Fence, Seen: seen.Fence, Repaired: true})
	return nil
}
