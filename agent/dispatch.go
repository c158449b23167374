package agent

import (
	"time"

	"github.com/leasefence/lab/history"
)

// Handler is what a driver does with each kind of output but a write,
// which Dispatch hands back (see Write): each driver runs writes its own
// way, and feeds Committed what became of them.
type Handler interface {
	// Emit records e in the history; e is the agent's until its next
	// input.
	Emit(e *history.Event)
	// Send puts r on the wire to the coordinator.
	Send(r *Request)
	// Arm fires timer t with gen at the true instant at.
	Arm(t Timer, gen uint32, at time.Duration)
	// Failed records the library's error f; the agent can go no further.
	Failed(f *Failure)
}

// Dispatch carries out a batch of the agent's outputs, in order: each
// Emit, Send and Arm through h. It returns the batch's write (always its
// last output), for the driver to run, or nil; and false if the batch
// ended with a Failed, which h has been told of, and then the driver goes
// no further with this agent.
func Dispatch(out []Output, h Handler) (write *WriteOp, ok bool) {
	for i := range out {
		o := &out[i]
		switch o.Kind {
		case Emit:
			h.Emit(o.Event)
		case Send:
			h.Send(o.Request)
		case Arm:
			h.Arm(o.Timer, o.Gen, o.At)
		case Write:
			write = o.Write
		case Failed:
			h.Failed(o.Failure)
			return nil, false
		}
	}
	return write, true
}
