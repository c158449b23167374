package harness

import (
	"sync"

	"github.com/leasefence/lab/history"
)

const (
	// foldBatch is how many events the engine hands the checker at a
	// time: a goroutine's start amortised over enough events to be noise
	// (well under a nanosecond an event).
	foldBatch = 1024
	// foldRing is how many batches the engine fills in turn. A batch is
	// filled again only after the fold core has read three others since
	// (about 700 KB), so its lines have mostly left that core's cache and
	// the engine's writes need not take them back from it.
	foldRing = 4
)

// folder feeds a checker on a goroutine beside the engine's, in batches of
// foldBatch events, so that where a core is spare the checker's fold (a
// tenth of the crowd's time) runs beside the engine instead of after each
// event. The checker sees the same events in the same order, so its digest
// and report are the ones an inline fold gives.
//
// The engine fills one batch while the one before it is folded; at most one
// fold runs at a time, and each fold is a goroutine of its own that ends
// with its batch, so a simulation dropped half-way leaves nothing running. A
// folder is used by one goroutine (the engine's); checked waits for the
// folds and hands back the checker, up to date, to read.
type folder struct {
	checker *history.Checker
	ring    [foldRing][]history.Event
	filling int // the batch the engine appends to
	folding int // the batch the running fold reads, if one runs
	running sync.WaitGroup
}

func newFolder(c *history.Checker) *folder { return &folder{checker: c} }

// add takes the next event, by value: the caller may reuse *e at once.
func (f *folder) add(e *history.Event) {
	b := &f.ring[f.filling]
	*b = append(*b, *e)
	if len(*b) == foldBatch {
		f.handOff()
	}
}

// handOff starts a fold of the filled batch, once the one before it ends,
// and moves the engine on to the next batch of the ring.
func (f *folder) handOff() {
	f.running.Wait()
	f.folding = f.filling
	f.filling = (f.filling + 1) % foldRing
	f.ring[f.filling] = f.ring[f.filling][:0]
	f.running.Add(1)
	go f.fold() // one allocation a batch: the go statement's closure
}

// fold folds the batch handed off, on its own goroutine.
func (f *folder) fold() {
	defer f.running.Done()
	foldInto(f.checker, f.ring[f.folding])
}

// checked waits for the running fold, folds what the engine filled since,
// and returns the checker, which has then seen every event added.
func (f *folder) checked() *history.Checker {
	f.running.Wait()
	b := &f.ring[f.filling]
	foldInto(f.checker, *b)
	*b = (*b)[:0]
	return f.checker
}

func foldInto(c *history.Checker, batch []history.Event) {
	for i := range batch {
		c.Add(&batch[i])
	}
}
