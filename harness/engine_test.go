package harness

import (
	"testing"
	"time"

	"github.com/leasefence/lab/spec"
)

func TestInverseClock(t *testing.T) {
	for _, rate := range []float64{1, 0.98, 1.02, 1.000001, 0.9} {
		for _, offset := range []time.Duration{0, 3 * time.Second, -time.Second} {
			fwd := func(v time.Duration) time.Duration { return offset + time.Duration(float64(v)*rate) }
			for _, r := range []time.Duration{offset, offset + 1, offset + time.Second, offset + 12345678901} {
				v := inverse(r, offset, rate, fwd)
				if fwd(v) < r || fwd(v-1) >= r {
					t.Fatalf("rate %v offset %v: inverse(%v) = %v, fwd(v)=%v fwd(v-1)=%v", rate, offset, r, v, fwd(v), fwd(v-1))
				}
			}
		}
	}
}

func TestTimerQueueOrder(t *testing.T) {
	var q timerQueue
	var seq uint64
	for _, at := range []time.Duration{5, 3, 9, 3, 1, 7, 3} {
		seq++
		q.push(timer{at: at, seq: seq})
	}
	var prev timer
	for i := 0; len(q) > 0; i++ {
		tm := q.pop()
		if i > 0 && tm.less(&prev) {
			t.Fatalf("popped %+v after %+v", tm, prev)
		}
		prev = tm
	}
}

func TestNameIndex(t *testing.T) {
	names := []string{spec.AgentName(0), spec.AgentName(1), spec.AgentName(2)}
	for _, tc := range []struct {
		name string
		want int
	}{
		{"agent-1", 0}, {"agent-3", 2}, {"agent-4", -1}, {"agent-0", -1}, {"agent-01", -1}, {"agent-+1", -1},
		{"agent-", -1}, {"res-1", -1}, {"", -1}, {"agent-1x", -1}, {"agent--1", -1},
	} {
		if got := nameIndex(names, "agent-", tc.name); got != tc.want {
			t.Errorf("nameIndex(%q) = %d, want %d", tc.name, got, tc.want)
		}
	}
}
