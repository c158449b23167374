package realtime

import (
	"context"
	"sync"

	"github.com/leasefence/lab/history"
)

// LockWatch stops a run at the first counterexample of a lock's own
// safety: it judges each mode's events as they happen (the live stream a
// dashboard hears), every few events, with the history's own checker,
// and ends the run once a mode's lock finding is broken. The run's
// verdict is still its history's, judged whole once it ended: the watch
// only decides when to stop.
type LockWatch struct {
	cancel context.CancelFunc

	mu       sync.Mutex
	h        *history.Header
	checkers map[history.Mode]*history.Checker
	seen     int
	broken   history.Mode
}

// watchEvery is how many events pass between two judgements of the live
// stream: a counterexample stops the run within that many events, at a
// cost a run of thousands of events does not notice.
const watchEvery = 32

// WatchLocks returns opts with a LockWatch listening to the run's events
// as they happen; cancel is the run's context's, which the watch calls
// once a lock finding is broken. Start the watch with the runner's header
// before the run.
func WatchLocks(opts Options, cancel context.CancelFunc) (Options, *LockWatch) {
	w := &LockWatch{cancel: cancel}
	opts.live = append(opts.live, history.SubscriberFunc(w.event))
	return opts, w
}

// Start gives the watch the run's header (Runner.Header).
func (w *LockWatch) Start(h history.Header) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.h = &h
	w.checkers = make(map[history.Mode]*history.Checker)
	for _, m := range h.Modes {
		w.checkers[m] = history.NewChecker(w.h, m)
	}
}

func (w *LockWatch) event(e history.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.checkers[e.Mode]
	if c == nil || w.broken != "" {
		return
	}
	c.Add(&e)
	if w.seen++; w.seen%watchEvery != 0 && e.Kind != history.LibraryError {
		return
	}
	for _, m := range w.h.Modes {
		if w.checkers[m].Report().Findings.Lock.Verdict == history.FindingBroken {
			w.broken = m
			w.cancel()
			return
		}
	}
}

// Stopped returns the mode whose lock finding stopped the run, if one did
// (none for a nil watch).
func (w *LockWatch) Stopped() (history.Mode, bool) {
	if w == nil {
		return "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.broken, w.broken != ""
}

// NewWatchedRunner is NewRunner with a LockWatch on the run, started:
// cancel is the run's context's, which the watch calls once a lock
// finding is broken.
func (s *Setup) NewWatchedRunner(opts RunOptions, cancel context.CancelFunc) (*Runner, *LockWatch, error) {
	o, w := WatchLocks(Options{Modes: opts.Modes, Backend: s.Backend, Contenders: s.Contenders, Store: s.Store, Subscribers: opts.Subscribers}, cancel)
	r, err := New(s.Scenario, o)
	if err != nil {
		return nil, nil, err
	}
	w.Start(r.Header())
	return r, w, nil
}
