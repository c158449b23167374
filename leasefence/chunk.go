package leasefence

// chunkLen is how many values one chunk holds. A chunk stays alive while
// any value carved from it does, so it is kept small: a client's current
// lease and recent request ids, and a gate's floor, each keep a chunk or
// two alive (with 1,000 clients, 8 rather than 32 saves 5 MB for one more
// allocation every 8 values rather than 32).
const chunkLen = 8

// chunk hands out pointers to zero values carved from a shared array, so
// that a loop making many small values that outlive the call (a Lease per
// completion) allocates once per chunkLen values instead of once per value.
// Each value is handed out once and never touched by the chunk again. It is
// not safe for concurrent use: its owner's lock guards it.
type chunk[T any] struct{ free []T }

func (c *chunk[T]) new() *T {
	if len(c.free) == 0 {
		c.free = make([]T, chunkLen)
	}
	p := &c.free[0]
	c.free = c.free[1:]
	return p
}
