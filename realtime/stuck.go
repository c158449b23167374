package realtime

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
)

// A lock can block in a call and never come back: a deadlock of its own,
// or a wait that ignores its context. Go cannot stop a goroutine from
// outside, so the runner cannot take the call back; what it can do is stop
// waiting for it. Every call to a mode's coordinator (a contender's lock)
// is tracked from its start to its return, and once the run's duration is
// over the runner waits its Grace for the calls under way to return. A
// call still under way then is recorded as the library's error in its
// mode (the lock's call never returned), the run's history ends there, and
// Run returns what was recorded with a *NeverReturnedError. The goroutine
// in the call stays blocked in it; nothing of the run waits for it.

// DefaultGrace is how long after its duration a run waits for the calls
// under way to return (Options.Grace). Every call's context has ended by
// then, and a lock that heeds its context returns at once; one that does
// not but bounds its own I/O (go-redis reads time out after 3s, etcd's
// client dials after 5s on a loaded machine) returns within its timeouts.
// Ten seconds is past those with room to spare on a loaded machine, and
// short beside the ten minutes a test binary would otherwise hang for.
const DefaultGrace = 10 * time.Second

// ErrNeverReturned is matched (errors.Is) by a *NeverReturnedError: a call
// to a lock was still under way a grace after the run's end.
var ErrNeverReturned = errors.New("realtime: a call to the lock never returned")

// NeverReturnedError is Run's error when calls to a lock were still under
// way a grace after the run's end. The run's result and history hold
// everything recorded up to then, and a library_error event for each.
type NeverReturnedError struct {
	Scenario string
	Seed     uint64
	Grace    time.Duration
	// Stalled: the run was abandoned (Runner.Abandon) because its clock
	// stopped, a testing/synctest bubble's, while wall time went on; Calls
	// are every call under way then, and may be none (the block was
	// elsewhere: a write, a lock's own goroutine).
	Stalled bool
	Calls   []StuckCall // the oldest first
}

// StuckCall is a call that never returned.
type StuckCall struct {
	Mode     history.Mode
	Agent    string
	Call     string // "Acquire", "Renew", "Release"
	Resource string
	At       time.Duration // when it was made, since the run began
}

// String says the call: "agent-1's Acquire of res-1 (mode lock), made at 1.2s".
func (c StuckCall) String() string {
	return fmt.Sprintf("%s's %s of %s (mode %s), made at %s", c.Agent, c.Call, c.Resource, c.Mode, history.FormatDuration(c.At))
}

func (e *NeverReturnedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: ", e.Scenario)
	switch {
	case e.Stalled && len(e.Calls) == 0:
		b.WriteString("the run's clock stopped with no call to the lock under way: a goroutine of the run is blocked in a way that is not durable (a sync.Mutex held across a sleep on the clock, a real socket)")
	case e.Stalled:
		fmt.Fprintf(&b, "%s, never returned: the run's clock stopped while it was under way (a sync.Mutex held across a sleep on the clock, a real socket)", e.Calls[0])
	default:
		fmt.Fprintf(&b, "%s, never returned: still under way %s after the run's end", e.Calls[0], history.FormatDuration(e.Grace))
	}
	if more := len(e.Calls) - 1; more > 0 {
		fmt.Fprintf(&b, " (and %s)", history.Plural(more, "other call", "other calls"))
	}
	fmt.Fprintf(&b, ", seed %d", e.Seed)
	if len(e.Calls) > 0 {
		b.WriteString(". The lock blocks without heeding its context; its goroutine stays blocked in the call, which nothing can stop")
	}
	b.WriteString(". The run ended without it, and its history holds what was recorded until then")
	return b.String()
}

func (e *NeverReturnedError) Is(target error) bool { return target == ErrNeverReturned }

// calls are the calls to the coordinators under way.
type calls struct {
	mu   sync.Mutex
	next uint64
	open map[uint64]StuckCall
}

// begin records call c as under way, and returns what records its return.
func (cs *calls) begin(c StuckCall) (done func()) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.open == nil {
		cs.open = make(map[uint64]StuckCall)
	}
	cs.next++
	id := cs.next
	cs.open[id] = c
	return func() {
		cs.mu.Lock()
		delete(cs.open, id)
		cs.mu.Unlock()
	}
}

// madeBy returns the calls under way that were made at or before
// instant at, the oldest first.
func (cs *calls) madeBy(at time.Duration) []StuckCall {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []StuckCall
	for _, c := range cs.open {
		if c.At <= at {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b StuckCall) int { return cmp.Compare(a.At, b.At) })
	return out
}

// call records a call to the mode's coordinator (a contender's lock) by
// holder on resource as under way, from its start to done. The wait for a
// restart to end is not in it: a call held up by a restart is the lab's.
func (w *world) call(name, holder, resource string) (done func()) {
	return w.r.calls.begin(StuckCall{Mode: w.mode, Agent: holder, Call: name, Resource: resource, At: w.r.now()})
}

// waitCalls waits for the run's goroutines (wg) once the run's context has
// ended. If calls to a coordinator made a grace ago or more are still
// under way a grace later, it stops waiting and returns them; a goroutine
// of the lab's own (a restart, a write to a store) that is slower is
// waited for, as every one of them heeds the run's context.
func (r *Runner) waitCalls(wg *sync.WaitGroup, done <-chan struct{}) []StuckCall {
	all := make(chan struct{})
	go func() {
		// This goroutine waits as long as a stuck call does, and does
		// nothing after: it is the only one that waits for it.
		wg.Wait()
		close(all)
	}()
	select {
	case <-all:
		return nil
	case <-done:
	}
	t := time.NewTicker(r.grace)
	defer t.Stop()
	for {
		select {
		case <-all:
			return nil
		case <-t.C:
			if stuck := r.calls.madeBy(r.now() - r.grace); len(stuck) > 0 {
				return stuck
			}
		}
	}
}

// ErrNotStalled is Abandon's error on a run that ended, or never began.
var ErrNotStalled = errors.New("realtime: only a run under way can be abandoned")

// Abandon ends a run whose clock stopped, from outside it: a run in a
// testing/synctest bubble where a goroutine is blocked in a way that is
// not durable (a sync.Mutex held across a sleep on the bubble's clock, a
// real socket), so that the bubble's clock stands still and Run never
// returns (Fired stands still while wall time passes). Every call under
// way is recorded as never returned (and, with none, the stall itself, as
// a library error in every mode), the history ends at the latest event,
// and Abandon returns the result with a *NeverReturnedError, Stalled; Run,
// should it ever return, returns the same. The run's goroutines stay
// where they are blocked: nothing can stop them.
func (r *Runner) Abandon() (*Result, error) {
	r.mu.Lock()
	if r.stopped || !r.began {
		r.mu.Unlock()
		return nil, ErrNotStalled
	}
	stuck := r.calls.madeBy(math.MaxInt64)
	r.recordStuckLocked(stuck, true)
	r.stopped, r.wall = true, r.last
	r.abandoned = &NeverReturnedError{Scenario: r.sc.Name, Seed: r.sc.Seed, Grace: r.grace, Stalled: true, Calls: stuck}
	r.mu.Unlock()
	err := r.assemble()
	return r.result(), errors.Join(r.abandoned, err)
}

// recordStuckLocked records each stuck call as the library's error in its
// mode, at the instant it was made (and, stalled with none, the stall in
// every mode, now); r.mu is held, before the run stops.
func (r *Runner) recordStuckLocked(stuck []StuckCall, stalled bool) {
	why := fmt.Sprintf("still under way %s after the run's end", history.FormatDuration(r.grace))
	if stalled {
		why = "the run's clock stopped while it was under way"
	}
	for _, c := range stuck {
		r.emitAtLocked(c.Mode, history.Event{Kind: history.LibraryError, Agent: agentIndex(r.h.Agents, c.Agent),
			Resource: agentIndex(r.h.Resources, c.Resource), Other: -1,
			Detail: fmt.Sprintf("%s: %s of %s never returned: %s", c.Agent, c.Call, c.Resource, why)}, c.At)
	}
	if stalled && len(stuck) == 0 {
		for _, m := range r.h.Modes {
			r.emitAtLocked(m, history.Event{Kind: history.LibraryError, Agent: -1, Resource: -1, Other: -1,
				Detail: "the run's clock stopped with no call to the lock under way: a goroutine of the run is blocked in a way that is not durable"}, r.last)
		}
	}
}
