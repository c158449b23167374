package realtime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// A library's lock granted fence 1 and then fence 2, and the lab recorded
// fence 1's grant after fence 2's (its reply was late back): fence 1 took
// over nothing, and nothing in the record ends fence 2 there. The history
// keeps fence 2 as the live lease, renewed and released by its holder,
// and writes no expiry of either. The lab's own coordinator mints in the
// order it records: there a lower fence is a grant of its own, which
// takes the resource over and proves the newer lease expired.
func TestGrantRecordedLateEndsNoLease(t *testing.T) {
	const lock history.Mode = "lock"
	for _, tc := range []struct {
		mode history.Mode
		want string
	}{
		{lock, "granted/2 granted/1 extended/2 released/2 granted/3"},
		{history.Fenced, "granted/2 expired/2 granted/1 expired/1 granted/3"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			start := time.Now()
			r := &Runner{h: history.Header{Modes: []history.Mode{tc.mode}, Agents: []string{"agent-1", "agent-2"}, Resources: []string{"res-1"},
				Contenders: []history.Contender{{Name: lock, Library: "a lock", Fence: true, Discipline: history.DisciplineFenced, Generations: GenerationsFence}}},
				start: start, emitted: map[history.Mode][]history.Event{}}
			w := &world{r: r, mode: tc.mode, gens: make([]genState, 1), clock: newCoordClock(start, 0)}
			grant := func(holder string, f leasefence.Fence) leasefence.Grant {
				now, _ := w.clock.Now()
				return leasefence.Grant{Token: leasefence.Token{Resource: "res-1", Holder: holder, Fence: f}, TTL: time.Minute, CoordinatorExpiresAt: now.Add(time.Minute)}
			}
			w.granted(1, 0, grant("agent-2", 2))
			w.granted(0, 0, grant("agent-1", 1)) // recorded after fence 2
			w.extended(0, grant("agent-2", 2))
			w.ended(0, 2, history.Released, r.now())
			w.granted(0, 0, grant("agent-1", 3))
			var got []string
			for _, e := range r.emitted[tc.mode] {
				got = append(got, fmt.Sprintf("%s/%d", e.Kind, e.Fence))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}
