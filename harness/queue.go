package harness

import "time"

// timerKind is what a scheduled timer does when it fires.
type timerKind uint8

const (
	tAgentStep      timerKind = iota + 1 // an agent's next step (gen-checked)
	tStallEnd                            // a scripted or live stall ends
	tRetry                               // an acquire's reply did not come in time (gen-checked)
	tRenew                               // renewal point of a lease (gen-checked)
	tDeliverRequest                      // a message reaches the coordinator
	tDeliverReply                        // a reply reaches its agent
	tExpiry                              // a lease's coordinator expiry instant
	tPush                                // the coordinator's Admit reaches a gate
	tRestart                             // a scheduled coordinator restart
	tPartitionBegin
	tPartitionEnd
	tScript       // a scripted action
	tIntervention // a recorded intervention replayed
)

// timer is one pending event of the discrete-event engine. It is a plain
// value kept in a slice heap, so scheduling allocates nothing once the heap
// has grown to the run's working size.
type timer struct {
	at    time.Duration
	seq   uint64 // insertion order: ties fire first-in, first-out
	kind  timerKind
	agent int32
	arg   int32  // a message slot, resource, or index into the scenario
	gen   uint32 // the agent generation the timer belongs to
	fence uint64
}

func (t *timer) less(u *timer) bool {
	if t.at != u.at {
		return t.at < u.at
	}
	return t.seq < u.seq
}

// timerQueue is a 4-ary min-heap of timers ordered by (at, seq): shallower
// than a binary heap, so a pop touches fewer cache lines.
type timerQueue []timer

const arity = 4

// push and pop move a hole rather than swapping, so each level costs one
// copy of a timer instead of three.
func (q *timerQueue) push(t timer) {
	*q = append(*q, t)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / arity
		if !t.less(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = t
}

func (q *timerQueue) pop() timer {
	h := *q
	top := h[0]
	last := len(h) - 1
	x := h[last]
	h = h[:last]
	*q = h
	if last == 0 {
		return top
	}
	i := 0
	for {
		first := arity*i + 1
		if first >= last {
			break
		}
		m := first
		for c := first + 1; c < min(first+arity, last); c++ {
			if h[c].less(&h[m]) {
				m = c
			}
		}
		if !h[m].less(&x) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = x
	return top
}

func (q timerQueue) peek() *timer { return &q[0] }
