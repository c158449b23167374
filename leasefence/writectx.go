package leasefence

import (
	"context"
	"sync"
	"time"
)

// lockCtx locks mu, or returns ctx.Err() without it if ctx is done first.
// sync.Mutex cannot stop waiting, so when mu is taken and ctx can end, a
// helper goroutine waits in Lock instead and hands the lock over on an
// unbuffered channel. A send on it completes only if this goroutine
// receives it, so exactly one of two things happens: this goroutine owns mu,
// or the helper, seeing ctx done, unlocks it again.
func lockCtx(ctx context.Context, mu *sync.Mutex) error {
	if mu.TryLock() {
		return nil
	}
	done := ctx.Done()
	if done == nil {
		mu.Lock() // ctx can never end: nothing to give up on
		return nil
	}
	handoff := make(chan struct{})
	go func() {
		mu.Lock()
		select {
		case handoff <- struct{}{}:
		case <-done:
			mu.Unlock()
		}
	}()
	select {
	case <-handoff:
		return nil
	case <-done:
		return ctx.Err()
	}
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

	// nested is held by each nested Commit made with this context, from
	// before its check until its write has returned: nested writes run one
	// at a time, like the gate's.
	nested sync.Mutex

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
	// inflight counts the nested Commits let in and not yet returned;
	// drained, made by finish if it must wait for them, is closed by the
	// last one.
	inflight int
	drained  chan struct{}
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

// enter lets a nested Commit in, unless the write has returned.
func (w *writeCtx) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.returned {
		return false
	}
	w.inflight++
	return true
}

// exit lets finish know that a nested Commit has returned.
func (w *writeCtx) exit() {
	w.mu.Lock()
	w.inflight--
	if w.inflight == 0 && w.drained != nil {
		close(w.drained)
	}
	w.mu.Unlock()
}

// finish marks the write returned, so no nested Commit is let in any more,
// cancels the context, and waits for the nested Commits already let in (by
// a goroutine the write did not wait for) to return.
func (w *writeCtx) finish() {
	w.mu.Lock()
	w.returned = true
	if w.err == nil {
		w.cancelLocked(context.Canceled)
	}
	stop := w.stop
	var drained chan struct{}
	if w.inflight > 0 {
		w.drained = make(chan struct{})
		drained = w.drained
	}
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	if drained != nil {
		<-drained
	}
}
