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
	// returned is true once the write has returned: the context is then
	// cancelled, and a Commit with it is escaped, not nested.
	returned bool
	// inflight counts the nested Commits let in and not yet returned;
	// drained, made by finish if it must wait for them, is closed by the
	// last one.
	inflight int32
	drained  chan struct{}
	// signal is made by the first call to Done. Most writes never ask for
	// it, and a Commit allocates its context and nothing else.
	signal *doneSignal
}

// doneSignal is a write context's Done channel and what closes it.
type doneSignal struct {
	err  error         // non-nil once done is closed: parent's error, or Canceled
	done chan struct{} // closed when err is set
	stop func() bool   // unregisters the AfterFunc that ends done with parent
}

// cancel closes done with err, once. The caller holds the context's mu.
func (s *doneSignal) cancel(err error) {
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

func (w *writeCtx) Deadline() (time.Time, bool) { return w.parent.Deadline() }

func (w *writeCtx) Value(key any) any {
	if k, ok := key.(gateKey); ok && k.g == w.gate {
		return w
	}
	return w.parent.Value(key)
}

// Err is Canceled once the write has returned, else parent's error. Once
// Done has been handed out, Err is non-nil only when it is closed: an error
// of parent that Done's AfterFunc has not delivered yet closes it here.
func (w *writeCtx) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.signal == nil {
		if w.returned {
			return context.Canceled
		}
		return w.parent.Err()
	}
	if w.signal.err == nil {
		if err := w.parent.Err(); err != nil {
			w.signal.cancel(err)
		}
	}
	return w.signal.err
}

func (w *writeCtx) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.signal != nil {
		return w.signal.done
	}
	s := &doneSignal{done: make(chan struct{})}
	w.signal = s
	if w.returned {
		s.cancel(context.Canceled)
	} else if err := w.parent.Err(); err != nil {
		s.cancel(err)
	} else if w.parent.Done() != nil {
		// AfterFunc runs its function on a goroutine of its own, never
		// inside this call, so taking w.mu there cannot deadlock.
		s.stop = context.AfterFunc(w.parent, func() {
			w.mu.Lock()
			s.cancel(w.parent.Err())
			w.mu.Unlock()
		})
	}
	return s.done
}

func (w *writeCtx) String() string { return "leasefence write context" }

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
	var stop func() bool
	if w.signal != nil {
		w.signal.cancel(context.Canceled)
		stop = w.signal.stop
	}
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
