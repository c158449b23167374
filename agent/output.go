package agent

import (
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// Timer names one of the agent's timers. A driver arms it as an Output
// asks and, when it fires, hands its Timer and Gen back to Fire; the agent
// ignores a timer it has since superseded, so a driver never cancels one.
type Timer uint8

// The agent's timers.
const (
	// TimerStep is the next step of the agent's loop: an attempt after
	// thinking, the check, or the write after a stall.
	TimerStep Timer = iota + 1
	// TimerRetry fires when an acquire's reply has not come in time: the
	// agent resends it or gives up waiting.
	TimerRetry
	// TimerRenew is the renewal point of the lease held.
	TimerRenew
	// TimerStallEnd ends a scripted stall (Gen 0) or a live one (Gen 1).
	TimerStallEnd
)

// OutputKind says what an Output asks of the driver.
type OutputKind uint8

// The outputs.
const (
	// Emit: record Event in the history. The driver stamps Seq, At and
	// Mode; the rest is the agent's.
	Emit OutputKind = iota + 1
	// Send: put Request on the wire to the coordinator, its fate drawn
	// with DrawSend.
	Send
	// Arm: fire Timer with Gen at the true instant At.
	Arm
	// Write: run the agent's write (Write), through the gate in fenced
	// mode, straight at the resource in naive mode, and hand the outcome
	// to Committed (or, if the store failed it, to WriteFailed). A Write is always the last output of its batch, and
	// the agent takes no step until Committed; a driver whose writes take
	// time may feed it other inputs meanwhile (a renewal's reply, a
	// timer), and a renewal refused during a write ends the lease after
	// it, as one refused during a stall does.
	Write
	// Failed: the library returned an error it never should (Failure). The
	// agent can go no further; a driver records it and ends the run.
	Failed
)

// Output is one thing the agent asks its driver to do. Only the fields of
// its Kind are set. What they point to is the agent's, and valid until its
// next input: a crowd of agents produces millions of outputs, and an Output
// that carried its event by value would be copied several times over for
// each.
type Output struct {
	Kind  OutputKind
	Timer Timer  // Arm
	Gen   uint32 // Arm

	At time.Duration // Arm: a true instant, never before the input's now

	Event   *history.Event // Emit
	Request *Request       // Send
	Write   *WriteOp       // Write
	Failure *Failure       // Failed
}

// WriteOp is a write the agent asks for: under Token, on resource
// Resource.
type WriteOp struct {
	Token    leasefence.Token
	Resource int
}

// Failure is an error the library returned that it never should: Op is
// the call.
type Failure struct {
	Op  string
	Err error
}

// Request is a message to the coordinator: an acquire (the agent's
// PendingAcquire), a renewal (its PendingRenewal) or the release of
// Release. Epoch is the coordinator incarnation of the lease a renewal or
// release concerns. RequestDelay and ReplyDelay, when set, replace the
// network's draw for this message (a scripted action's exact delays).
//
// An Output is copied for every step of a crowd of agents, so a Request
// names the pending request rather than carrying its copy.
type Request struct {
	Kind    history.Request
	Release leasefence.Token // RequestRelease
	Epoch   int32

	RequestDelay, ReplyDelay *time.Duration
}
