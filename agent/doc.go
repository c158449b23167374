// Package agent is the lab's agent as a state machine: one process that
// thinks, picks a resource, acquires a lease on it (resending under the same
// request id when no reply comes), and for each write checks its lease,
// stalls, and writes; renews when the renewal point comes; gives up, releases
// or lets the lease lapse; or follows a script of exact actions.
//
// It does no I/O, reads no clock and starts no goroutine, in the manner of
// etcd raft's RawNode: a driver feeds it inputs (a timer fired, a reply
// arrived, a write returned, an intervention), each with the driver's
// current true instant, and carries out the Outputs it returns, in order:
// emit this event, send this request, arm this timer, run this write through
// the gate. The simulator (package harness) drives it on virtual time and a
// simulated network; the real-time runner on goroutines and real clocks.
// Every rule of the agent lives here once, so both drivers make the same
// decisions from the same seed.
//
// The agent drives a real leasefence.Client, whose clock the driver supplies
// (the Client anchors each lease at its request's send time on that clock);
// the library is pure, so that is no I/O either.
package agent
