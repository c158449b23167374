package harness

import "github.com/leasefence/lab/history"

// Subscriber receives every event of a simulation, synchronously, on the
// simulation's goroutine, in order (see history.Subscriber). A consumer
// that must never slow the run (a dashboard) should read Snapshots or use
// a Feed.
type (
	Subscriber     = history.Subscriber
	SubscriberFunc = history.SubscriberFunc
)
