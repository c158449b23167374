package realtime

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
)

// Grants are listed in fence order within an incarnation, whatever their
// stamps say: a coordinator that stamps after it minted can stamp a later
// fence earlier.
func TestInFenceOrder(t *testing.T) {
	events := []history.Event{
		{Kind: history.Granted, Fence: 2, At: 10},
		{Kind: history.Granted, Fence: 1, At: 12},
		{Kind: history.Acquired, Fence: 1, At: 11},
		{Kind: history.Granted, Fence: 1, Incarnation: 1, At: 5},
	}
	InFenceOrder(events)
	if events[0].At != 13 || events[1].At != 12 || events[2].At != 11 || events[3].At != 5 {
		t.Errorf("instants %v %v %v %v, want fence 2 after fence 1 (13), the rest as stamped",
			events[0].At, events[1].At, events[2].At, events[3].At)
	}
}

// A grant is not moved past the instant its holder had it: a fence that
// reached its holder before a lower fence was stamped was minted before
// it, by a counter that went back (a failover's promoted replica reissuing
// fences), and the record keeps it where it was.
func TestInFenceOrderKeepsWhatTheHolderHad(t *testing.T) {
	events := []history.Event{
		{Kind: history.Granted, Agent: 0, Fence: 10, At: 1662},
		{Kind: history.Acquired, Agent: 0, Fence: 10, At: 1663},
		{Kind: history.RequestSent, Agent: 1, RequestID: "r9", At: 3925},
		{Kind: history.Granted, Agent: 1, Fence: 9, At: 3933, RequestID: "r9"}, // reissued
		{Kind: history.RequestSent, Agent: 2, RequestID: "r11", At: 3920},
		{Kind: history.Granted, Agent: 2, Fence: 11, At: 3930, RequestID: "r11"},
	}
	InFenceOrder(events)
	if events[0].At != 1662 {
		t.Errorf("fence 10, in its holder's hands at 1663, moved to %v", events[0].At)
	}
	if events[3].At != 3933 || events[5].At != 3930 {
		t.Errorf("fences 9 and 11 at %v and %v, want them as stamped (3933, 3930): the reissued 9, asked for after 10 was held, is the record's, for the checker", events[3].At, events[5].At)
	}
	// A lower fence recorded late, its request sent before the higher one
	// was held (a process paused between its lock's return and the
	// record: etcd's revisions are never reissued), is moved before it.
	late := []history.Event{
		{Kind: history.RequestSent, Agent: 0, RequestID: "r9", At: 50},
		{Kind: history.Granted, Agent: 1, Fence: 10, At: 100, RequestID: "r10"},
		{Kind: history.Acquired, Agent: 1, Fence: 10, At: 101},
		{Kind: history.Granted, Agent: 0, Fence: 9, At: 150, RequestID: "r9"},
		{Kind: history.Acquired, Agent: 0, Fence: 9, At: 151},
	}
	InFenceOrder(late)
	if late[3].At != 99 || late[1].At != 100 {
		t.Errorf("fence 9 at %v, fence 10 at %v: want 9 moved before 10 (99), 10 as stamped", late[3].At, late[1].At)
	}
}

// stamped is a resource whose record is given: the writes in the order it
// applied them, with stamps that need not rise.
type stamped struct {
	Resource
	record []Landing
}

func (s stamped) Landings(context.Context) ([]Landing, error) { return s.record, nil }

// Landings follow the resource's own order, never earlier than the write
// before them, and end where the run did.
func TestLandingsFromTheRecord(t *testing.T) {
	r := &Runner{h: history.Header{Resources: []string{"res-1"}}}
	w := &world{r: r, mode: history.Fenced, discipline: history.DisciplineFenced}
	a := w.writes.add(&history.Event{Agent: 0, Resource: 0, Fence: 1})
	b := w.writes.add(&history.Event{Agent: 1, Resource: 0, Fence: 2})
	c := w.writes.add(&history.Event{Agent: 0, Resource: 0, Fence: 3})
	w.resources = []Resource{stamped{record: []Landing{{ID: b, At: 20}, {ID: a, At: 15}, {ID: c, At: 99}}}}
	got, err := w.landings(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Fence != 2 || got[0].At != 20 || got[1].Fence != 1 || got[1].At != 20 ||
		got[0].Kind != history.CommitAdmitted || got[0].Mode != history.Fenced {
		t.Fatalf("landings %+v, want fence 2 then fence 1, both at 20, and none after the end", got)
	}
	w.resources = []Resource{stamped{record: []Landing{{ID: 42, At: 1}}}}
	if _, err := w.landings(context.Background(), 50); err == nil {
		t.Error("a record naming a write never sent was taken")
	}
}

// A grant of the fence the resource's newest generation has is a replay
// (a retried request answered again) only for the same holder: to another
// holder it is the fence minted again, by a counter that went back, and a
// generation of its own in the history.
func TestGrantedReplayIsTheSameHolders(t *testing.T) {
	start := time.Now()
	r := &Runner{h: history.Header{Agents: []string{"agent-1", "agent-2"}, Resources: []string{"res-1"}}, start: start, emitted: map[history.Mode][]history.Event{}}
	w := &world{r: r, mode: history.Fenced, gens: make([]genState, 1), clock: newCoordClock(start, 0)}
	grant := func(holder string) leasefence.Grant {
		now, _ := w.clock.Now()
		return leasefence.Grant{Token: leasefence.Token{Resource: "res-1", Holder: holder, Fence: 10}, TTL: time.Second, CoordinatorExpiresAt: now.Add(time.Second)}
	}
	for _, tc := range []struct {
		holder int
		fresh  bool
	}{{0, true}, {0, false}, {1, true}} {
		if fresh, _ := w.granted(tc.holder, 0, grant(r.h.Agents[tc.holder])); fresh != tc.fresh {
			t.Errorf("fence 10 to %s: fresh %v, want %v", r.h.Agents[tc.holder], fresh, tc.fresh)
		}
	}
	var grants int
	for _, e := range r.emitted[history.Fenced] {
		if e.Kind == history.Granted {
			grants++
		}
	}
	if grants != 2 {
		t.Errorf("%d grants in the history, want 2: agent-1's and agent-2's", grants)
	}
}

// A release whose answer comes back after the next grant, sent before it,
// is what let the lease go: the expiry the runner guessed at the grant
// becomes that release, dated at its send, so the history does not claim
// the lease ran to its deadline past the next grant (a mutual-exclusion
// violation of the runner's making).
func TestReleaseInFlightReplacesTheGuessedExpiry(t *testing.T) {
	start := time.Now()
	r := &Runner{h: history.Header{Agents: []string{"agent-1", "agent-2"}, Resources: []string{"res-1"}}, start: start, emitted: map[history.Mode][]history.Event{}}
	w := &world{r: r, mode: history.Naive, gens: make([]genState, 1), clock: newCoordClock(start, 0)}
	grant := func(holder string, f leasefence.Fence) leasefence.Grant {
		now, _ := w.clock.Now()
		return leasefence.Grant{Token: leasefence.Token{Resource: "res-1", Holder: holder, Fence: f}, TTL: time.Minute, CoordinatorExpiresAt: now.Add(time.Minute)}
	}
	w.granted(0, 0, grant("agent-1", 1))
	sent := r.now()
	time.Sleep(time.Millisecond)
	w.granted(1, 0, grant("agent-2", 2)) // the release of fence 1 is on its way
	w.releasedOther(0, leasefence.Token{Resource: "res-1", Holder: "agent-1", Fence: 1}, sent)
	var kinds []history.Kind
	for _, e := range r.emitted[history.Naive] {
		kinds = append(kinds, e.Kind)
		if e.Kind == history.Released && (e.Fence != 1 || e.At != sent) {
			t.Errorf("release %+v, want fence 1 at its send, %v", e, sent)
		}
	}
	if want := []history.Kind{history.Granted, history.Released, history.Granted}; !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

// A release recorded before the next grant, but answered after the
// coordinator stamped that grant, is dated at its call's arrival when
// that came first: dated at its answer, the history would have the grant
// before the release, a mutual-exclusion violation of the runner's making
// (overlap on redis, --release --agents 6 --ttl 200ms --think 1ms-5ms
// --stall 1ms-2ms, agents in process: 1-2 a run). A release whose call
// came after the stamp keeps its date: the order is the lock's to answer.
func TestReleaseAnsweredAfterTheNextGrantsStamp(t *testing.T) {
	for _, tc := range []struct {
		name         string
		calledBefore bool
	}{{"called before the stamp", true}, {"called after the stamp", false}} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := &Runner{h: history.Header{Agents: []string{"agent-1", "agent-2"}, Resources: []string{"res-1"}}, start: start, emitted: map[history.Mode][]history.Event{}}
			w := &world{r: r, mode: history.Naive, gens: make([]genState, 1), clock: newCoordClock(start, 0)}
			grant := func(holder string, f leasefence.Fence, stamp leasefence.Instant) leasefence.Grant {
				return leasefence.Grant{Token: leasefence.Token{Resource: "res-1", Holder: holder, Fence: f}, TTL: time.Minute, CoordinatorExpiresAt: stamp.Add(time.Minute)}
			}
			now, _ := w.clock.Now()
			w.granted(0, 0, grant("agent-1", 1, now))
			called := r.now()
			time.Sleep(2 * time.Millisecond)
			stamp, _ := w.clock.Now() // the coordinator stamps the next grant
			if !tc.calledBefore {
				time.Sleep(2 * time.Millisecond)
				called = r.now()
			}
			time.Sleep(2 * time.Millisecond)
			w.ended(0, 1, history.Released, called) // the release's answer is recorded
			w.granted(1, 0, grant("agent-2", 2, stamp))
			events := slices.Clone(r.emitted[history.Naive])
			slices.SortStableFunc(events, func(a, b history.Event) int { return cmp.Compare(a.At, b.At) })
			var got []string
			for _, e := range events {
				got = append(got, fmt.Sprintf("%s/%d", e.Kind, e.Fence))
				if e.Kind == history.Released && tc.calledBefore && e.At != called {
					t.Errorf("release at %v, want its call's arrival, %v", e.At, called)
				}
			}
			want := "granted/1 released/1 granted/2"
			if !tc.calledBefore {
				want = "granted/1 granted/2 released/1"
			}
			if g := strings.Join(got, " "); g != want {
				t.Errorf("events %s, want %s", g, want)
			}
		})
	}
}
