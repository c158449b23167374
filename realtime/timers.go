package realtime

import (
	"cmp"
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The run's timers: every timed thing the runner does (an agent's timer,
// a message's delay on the wire, a script's action, a push's delay, a
// partition's window, a restart) is one entry of one queue, fired by one
// goroutine in the order of its instant, then its agent (-1 for the run's
// own faults, first), then the order it was armed in. In real time that
// is the order they come due in anyway; in a testing/synctest bubble,
// where many come due at exactly one virtual instant, it is what makes a
// seed's run the same run every time (with Options.Settle, each fired
// entry runs until it waits before the next is fired). An entry due at or
// after the run's end never fires: the run covers [0, duration), whichever
// of the run's end and the entry a scheduler would have woken first.

// timer is one entry of the queue.
type timer struct {
	at    time.Duration
	agent int
	seq   uint64
	f     func(ctx context.Context)
}

type timerHeap []timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if c := cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.agent, b.agent)); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// timers is the run's queue.
type timers struct {
	mu    sync.Mutex
	queue timerHeap
	seq   uint64
	wake  chan struct{} // a new entry may be due before the one waited for
	fired atomic.Uint64
}

func newTimers() *timers { return &timers{wake: make(chan struct{}, 1)} }

// after fires f on a goroutine of the run at true instant at (now, if it
// is past), ordered among the entries of that instant by agent (-1 for
// none) and then by the order of the calls to after.
func (r *Runner) after(at time.Duration, agent int, f func(ctx context.Context)) {
	q := r.timers
	q.mu.Lock()
	q.seq++
	heap.Push(&q.queue, timer{at: at, agent: agent, seq: q.seq, f: f})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next pops the first entry due by now, or says how long until the first
// is due (ok false, wait < 0 for none).
func (q *timers) next(now, end time.Duration) (t timer, wait time.Duration, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 || q.queue[0].at >= end {
		return timer{}, -1, false
	}
	if d := q.queue[0].at - now; d > 0 {
		return timer{}, d, false
	}
	return heap.Pop(&q.queue).(timer), 0, true
}

// fire fires the queue's entries as they come due, until ctx ends; settle,
// if set, is called after each.
func (r *Runner) fire(ctx context.Context, settle func()) {
	q := r.timers
	clock := time.NewTimer(time.Hour)
	defer clock.Stop()
	for {
		t, wait, ok := q.next(r.now(), r.sc.Duration)
		if ok {
			q.fired.Add(1)
			r.spawn(t.f)
			if settle != nil {
				settle()
			}
			continue
		}
		var due <-chan time.Time
		if wait >= 0 {
			clock.Reset(wait)
			due = clock.C
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-due:
		}
	}
}

// Fired is how many timers the run has fired so far. Read from outside a
// testing/synctest bubble, a count that stands still while wall time
// passes says the bubble's clock stopped: some goroutine of the run is
// blocked in a way that is not durable (a sync.Mutex held across a
// virtual sleep, a real socket), and Abandon can end the run.
func (r *Runner) Fired() uint64 { return r.timers.fired.Load() }
