package history

// Subscriber receives every event of a run, synchronously, in history
// order, on the runner's goroutine (or under its history lock). It must not
// call back into the runner. A slow subscriber slows the run but never
// changes its outcome; a consumer that must never slow it (a dashboard)
// should read snapshots instead.
type Subscriber interface {
	Event(Event)
}

// SubscriberFunc adapts a function to Subscriber.
type SubscriberFunc func(Event)

// Event calls f(e).
func (f SubscriberFunc) Event(e Event) { f(e) }
