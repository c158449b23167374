package realtime

// rwGate is a read-write lock whose waiters wait on channels. A goroutine
// waiting on a sync.RWMutex is not durably blocked in a testing/synctest
// bubble, so a restart waiting for a call that waits on the bubble's
// clock (a connection's latency, a client's timeout, a lock's backoff)
// would stop that clock for good; one waiting on a channel is, and the
// clock goes on. A writer waiting holds off readers that come after it,
// as a sync.RWMutex's does, so a restart is not starved by the agents'
// calls. Make one with newRWGate.
type rwGate struct {
	turn    chan struct{} // taken by a writer until it holds held; readers pass through it
	held    chan struct{} // full while a writer, or the readers as a group, hold the gate
	readers chan int      // the count of readers holding the gate, its only value
}

func newRWGate() *rwGate {
	g := &rwGate{turn: make(chan struct{}, 1), held: make(chan struct{}, 1), readers: make(chan int, 1)}
	g.readers <- 0
	return g
}

// RLock read-holds the gate, behind any writer already waiting.
func (g *rwGate) RLock() {
	g.turn <- struct{}{}
	<-g.turn
	n := <-g.readers
	if n == 0 {
		g.held <- struct{}{}
	}
	g.readers <- n + 1
}

// RUnlock lets go of one read-hold.
func (g *rwGate) RUnlock() {
	n := <-g.readers
	if n == 1 {
		<-g.held
	}
	g.readers <- n - 1
}

// Lock holds the gate alone, once every reader let go.
func (g *rwGate) Lock() {
	g.turn <- struct{}{}
	g.held <- struct{}{}
	<-g.turn
}

// Unlock lets go of the gate a Lock holds.
func (g *rwGate) Unlock() { <-g.held }
