package procdriver

import (
	"errors"
	"testing"

	"github.com/leasefence/lab/spec"
)

// Write ids are unique for every run Check accepts: 300 lives of one agent
// (the old layout gave a life 8 bits, so life 256 was life 0 again), the
// most agents a scenario may have, and the last write a layout holds.
func TestWriteIDsNeverCollide(t *testing.T) {
	crashes := func(agent string, n int) []spec.Crash {
		cs := make([]spec.Crash, n)
		for i := range cs {
			cs[i] = spec.Crash{Agent: agent, At: 1, Restart: 1}
		}
		return cs
	}
	for _, sc := range []spec.Scenario{
		{Agents: 2, Crashes: crashes("agent-1", 300)},
		{Agents: spec.MaxAgents, Crashes: crashes("agent-7", 127)},
		{Agents: 1},
	} {
		l := newIDLayout(sc)
		if err := l.check(sc); err != nil {
			t.Fatalf("%d agents, %d crashes: %v", sc.Agents, len(sc.Crashes), err)
		}
		lastWrite := uint64(1)<<l.writeBits - 1
		type write struct {
			agent, life int
			n           uint64
		}
		ids := map[uint64]write{}
		for _, agent := range []int{0, 1, sc.Agents / 2, sc.Agents - 1} {
			for _, life := range []int{0, 1, 255, 256, len(sc.Crashes)} {
				for _, n := range []uint64{1, 2, 1 << 32, lastWrite} {
					if agent >= sc.Agents || life > len(sc.Crashes) {
						continue
					}
					w := write{agent, life, n}
					id, ok := l.id(agent, life, n)
					if !ok {
						t.Fatalf("no id for %+v (layout %+v)", w, l)
					}
					if prev, dup := ids[id]; dup && prev != w {
						t.Fatalf("id %#x given to %+v and %+v", id, prev, w)
					}
					ids[id] = w
				}
			}
		}
		if _, ok := l.id(0, 0, lastWrite+1); ok && l.writeBits < 64 {
			t.Errorf("a write beyond the layout got an id")
		}
		if _, ok := l.id(0, 1<<l.lifeBits, 1); ok {
			t.Errorf("a life beyond the layout got an id")
		}
	}
	// Lives that leave too few bits for the writes are refused, with
	// ErrCannotPlay.
	sc := spec.Scenario{Agents: spec.MaxAgents, Crashes: crashes("agent-1", 1<<10)}
	if err := newIDLayout(sc).check(sc); !errors.Is(err, ErrCannotPlay) {
		t.Errorf("%d agents with %d lives of one: %v, want ErrCannotPlay", sc.Agents, len(sc.Crashes), err)
	}
}
