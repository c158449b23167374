package leasefence

import (
	"context"
	"sync"
	"sync/atomic"
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
//
// A write that neither asks for Done nor nests a Commit, which is most of
// them, costs its Commit this allocation and two atomic operations (the
// Or in finish and the Load after it): no lock. Everything rarer takes mu.
type writeCtx struct {
	parent context.Context
	gate   *FenceGate

	// nested is held by each nested Commit made with this context, from
	// before its check until its write has returned: nested writes run one
	// at a time, like the gate's.
	nested sync.Mutex

	// state is returnedBit once the write has returned (the context is
	// then cancelled, and a Commit with it is escaped, not nested), plus
	// twice the number of nested Commits let in and not yet returned.
	state atomic.Uint32
	// signal is made by the first call to Done, under mu, and never
	// replaced.
	signal atomic.Pointer[doneSignal]

	mu sync.Mutex // guards drained, and the making and ending of signal
	// drained, made by finish if it must wait for nested Commits, is
	// closed by the last of them.
	drained chan struct{}
}

// returnedBit is the bit of writeCtx.state that says the write returned;
// the count of nested Commits in flight is kept above it.
const returnedBit = 1

// doneSignal is a write context's Done channel and what closes it.
type doneSignal struct {
	err  error         // non-nil once done is closed: parent's error, or Canceled; guarded by the context's mu
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

func (w *writeCtx) returned() bool { return w.state.Load()&returnedBit != 0 }

// Err is Canceled once the write has returned, else parent's error. Once
// Done has been handed out, Err is non-nil only when it is closed: an error
// of parent that Done's AfterFunc has not delivered yet closes it here.
func (w *writeCtx) Err() error {
	s := w.signal.Load()
	if s == nil {
		if w.returned() {
			return context.Canceled
		}
		return w.parent.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.err == nil {
		if err := w.parent.Err(); err != nil {
			s.cancel(err)
		}
	}
	return s.err
}

// Done makes the signal on first use. It stores the signal, then reads
// whether the write has returned; finish marks the write returned, then
// reads the signal. Go's atomics are sequentially consistent, so at least
// one of the two sees the other: either finish cancels the signal, or Done
// finds the write returned and cancels it itself (both, under mu, is
// harmless). A Done channel is therefore always closed once the write has
// returned.
func (w *writeCtx) Done() <-chan struct{} {
	if s := w.signal.Load(); s != nil {
		return s.done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.signal.Load(); s != nil {
		return s.done
	}
	s := &doneSignal{done: make(chan struct{})}
	w.signal.Store(s)
	if w.returned() {
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
	for {
		s := w.state.Load()
		if s&returnedBit != 0 {
			return false
		}
		if w.state.CompareAndSwap(s, s+2) {
			return true
		}
	}
}

// exit lets finish know that a nested Commit has returned. The last one to
// leave a returned write closes drained, which finish may be waiting on.
func (w *writeCtx) exit() {
	if w.state.Add(^uint32(1)) == returnedBit { // minus 2: returned, none left
		w.mu.Lock()
		if w.drained != nil {
			close(w.drained)
		}
		w.mu.Unlock()
	}
}

// finish marks the write returned, so no nested Commit is let in any more,
// cancels the context, and waits for the nested Commits already let in (by
// a goroutine the write did not wait for) to return.
func (w *writeCtx) finish() {
	if w.state.Or(returnedBit) == 0 && w.signal.Load() == nil {
		return // nothing nested in flight, and no Done to close (see Done)
	}
	w.mu.Lock()
	var stop func() bool
	if s := w.signal.Load(); s != nil {
		s.cancel(context.Canceled)
		stop = s.stop
	}
	// Made under mu, then the count read again: the last nested Commit
	// either left before this reading, or closes drained after it (exit
	// takes mu to look at drained).
	var drained chan struct{}
	if w.state.Load() != returnedBit {
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
