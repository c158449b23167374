package history

import (
	"time"

	"github.com/leasefence/lab/leasefence"
)

// idleWaits is the fold of the availability a lock gave up: per resource,
// the true time it sat with no live lease while an acquirer waited for it.
//
// A resource is free from the start of the run, from the Expired or
// Released event of its lease, and from a CoordinatorRestarted (a restart
// forgets every lease); it is held from a Granted event. Someone waits for
// a free resource from the first denial of it with the reason "lock-delay"
// (leasefence.ReasonLockDelay: the coordinator refused a resource no lease
// held) until the next Granted of it; the history's last event closes a
// wait still open. A denial is recorded when its reply reaches the agent,
// so a wait is counted from when the first acquirer learnt of the refusal:
// a denial for a live holder ("held") whose reply arrives after the
// lease's end is not idleness, and a lock that refuses no free resource
// gives up none. Idle time is the sum of these waits over every resource.
type idleWaits struct {
	held  []bool
	since []time.Duration // when the current wait began; -1: no one waits
	total time.Duration
	last  time.Duration
}

func newIdleWaits(resources int) *idleWaits {
	w := &idleWaits{held: make([]bool, resources), since: make([]time.Duration, resources)}
	for i := range w.since {
		w.since[i] = -1
	}
	return w
}

func (w *idleWaits) add(e *Event) {
	w.last = max(w.last, e.At)
	r := e.Resource
	switch e.Kind {
	case Granted:
		if w.since[r] >= 0 {
			w.total += e.At - w.since[r]
			w.since[r] = -1
		}
		w.held[r] = true
	case Expired, Released:
		w.held[r] = false
	case Denied:
		if e.Reason == leasefence.ReasonLockDelay && !w.held[r] && w.since[r] < 0 {
			w.since[r] = e.At
		}
	case CoordinatorRestarted:
		clear(w.held)
	}
}

// idle is the idle time so far: the closed waits and those still open at
// the last event.
func (w *idleWaits) idle() time.Duration {
	t := w.total
	for _, s := range w.since {
		if s >= 0 {
			t += w.last - s
		}
	}
	return t
}
