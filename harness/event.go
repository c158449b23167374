package harness

import "github.com/leasefence/lab/history"

// Subscriber receives every event of a simulation, synchronously, on the
// simulation's goroutine, in order. It must not call back into the
// simulation. A slow subscriber slows the run but never changes its outcome;
// a consumer that must never slow it (a dashboard) should read Snapshots or
// use a Feed.
type Subscriber interface {
	Event(history.Event)
}

// SubscriberFunc adapts a function to Subscriber.
type SubscriberFunc func(history.Event)

// Event calls f(e).
func (f SubscriberFunc) Event(e history.Event) { f(e) }
