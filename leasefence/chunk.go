package leasefence

import "unsafe"

// chunkLen is how many values one chunk holds. A chunk stays alive while
// any value carved from it does, so it is kept small.
const chunkLen = 32

// chunk hands out pointers to zero values carved from a shared array, so
// that a loop making many small values that outlive the call (a Lease per
// completion) allocates once per chunkLen values instead of once per value.
// It is not safe for concurrent use: its owner's lock guards it.
type chunk[T any] struct{ free []T }

func (c *chunk[T]) new() *T {
	if len(c.free) == 0 {
		c.free = make([]T, chunkLen)
	}
	p := &c.free[0]
	c.free = c.free[1:]
	return p
}

// byteChunk makes strings out of a shared buffer, for the same reason. The
// bytes behind a string it returned are never written again, which is what
// makes the unsafe.String conversion sound.
type byteChunk struct{ free []byte }

func (c *byteChunk) string(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(c.free) < len(b) {
		c.free = make([]byte, max(len(b), 64*chunkLen))
	}
	n := copy(c.free, b)
	s := unsafe.String(&c.free[0], n)
	c.free = c.free[n:]
	return s
}
