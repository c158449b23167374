package leasefence

import (
	"context"
	"slices"
	"sync"
	"time"
)

// turn is a lock that is handed to its waiters in the order they came, and
// that a waiter gives up waiting for when its ctx is done, which sync.Mutex
// cannot do. Its fields are guarded by a mutex of its owner's, held around
// every call. The zero turn is free.
type turn struct {
	taken bool
	// waiters are the Commits waiting for the turn, oldest first. Each
	// channel has room for one value: give sends it, which hands over the
	// turn without taken ever being false in between.
	waiters []chan struct{}
}

// take takes the turn for a caller that holds mu: at once if it is free,
// otherwise after waiting, with mu released, until it is handed over. If
// ctx is done first, take returns ctx.Err() without the turn. Either way mu
// is held again when take returns.
func (q *turn) take(ctx context.Context, mu *sync.Mutex) error {
	if !q.taken {
		q.taken = true
		return nil
	}
	ch := make(chan struct{}, 1)
	q.waiters = append(q.waiters, ch)
	mu.Unlock()
	select {
	case <-ch:
		mu.Lock()
		return nil
	case <-ctx.Done():
		mu.Lock()
		if i := slices.Index(q.waiters, ch); i >= 0 {
			q.waiters = slices.Delete(q.waiters, i, i+1)
		} else {
			// The turn was handed over as ctx ended: pass it on.
			q.give()
		}
		return ctx.Err()
	}
}

// give gives the turn up, handing it to the oldest waiter if there is one.
// The caller holds the turn and the owner's mutex.
func (q *turn) give() {
	if len(q.waiters) == 0 {
		q.taken = false
		return
	}
	ch := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	ch <- struct{}{} // room for one, and sent to once: never blocks
}

// gateKey finds, in a write's context, the write of that gate it belongs to.
type gateKey struct{ g *FenceGate }

// writeCtx is the context one write callback receives, made afresh for each
// write and never reused: a goroutine that keeps it after the write returns
// (an HTTP transport's, say) can only ever see this write's values. It
// carries the Commit's ctx (values, deadline, cancellation), is cancelled
// when the write returns, and marks the write, so that a Commit with it is
// handled in place while the write runs and refused once it has returned.
type writeCtx struct {
	parent context.Context
	gate   *FenceGate

	mu sync.Mutex // guards the fields below
	// err is non-nil once the context is done: parent's error, or Canceled
	// once the write returned.
	err error
	// done is made on the first call to Done (a write that never asks for
	// it costs no channel) and closed when err is set.
	done chan struct{}
	// stop unregisters the AfterFunc that ends this context with parent.
	stop func() bool
	// returned is true once the write has returned: a Commit with this
	// context is then escaped, not nested.
	returned bool
	// nested is taken by each nested Commit for its check and write, and
	// by finish to mark the write returned.
	nested turn
}

func (w *writeCtx) Deadline() (time.Time, bool) { return w.parent.Deadline() }

func (w *writeCtx) Value(key any) any {
	if k, ok := key.(gateKey); ok && k.g == w.gate {
		return w
	}
	return w.parent.Value(key)
}

func (w *writeCtx) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		if err := w.parent.Err(); err != nil {
			w.cancelLocked(err)
		}
	}
	return w.err
}

func (w *writeCtx) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done != nil {
		return w.done
	}
	w.done = make(chan struct{})
	if w.err == nil {
		w.err = w.parent.Err()
	}
	switch {
	case w.err != nil:
		close(w.done)
	case w.parent.Done() != nil:
		// AfterFunc runs its function on a goroutine of its own, never
		// inside this call, so taking w.mu there cannot deadlock.
		w.stop = context.AfterFunc(w.parent, func() {
			w.mu.Lock()
			if w.err == nil {
				w.cancelLocked(w.parent.Err())
			}
			w.mu.Unlock()
		})
	}
	return w.done
}

func (w *writeCtx) String() string { return "leasefence write context" }

// cancelLocked ends the context with err. The caller holds w.mu and has
// seen w.err == nil.
func (w *writeCtx) cancelLocked(err error) {
	w.err = err
	if w.done != nil {
		close(w.done)
	}
}

// finish marks the write returned, once the nested Commits it let in have
// returned (it takes their turn, and keeps it: no nested Commit runs after
// this), and cancels the context.
func (w *writeCtx) finish() {
	w.mu.Lock()
	_ = w.nested.take(context.Background(), &w.mu) // cannot fail: Background is never done
	w.returned = true
	w.nested.give() // to any Commit still queued: it finds returned set and refuses
	if w.err == nil {
		w.cancelLocked(context.Canceled)
	}
	stop := w.stop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// giveNested gives up w's nested turn after a nested Commit.
func (w *writeCtx) giveNested() {
	w.mu.Lock()
	w.nested.give()
	w.mu.Unlock()
}
