package procdriver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
)

const ms = time.Millisecond

func ev(at time.Duration, k history.Kind, agent int, fence uint64, deadline time.Duration) history.Event {
	return history.Event{At: at, Kind: k, Agent: agent, Resource: 0, Fence: leasefence.Fence(fence), Other: -1, Deadline: deadline}
}

// sent is agent's release of generation fence, sent at at with request
// delay dur.
func sent(at time.Duration, agent int, fence uint64, dur time.Duration) history.Event {
	e := ev(at, history.RequestSent, agent, fence, 0)
	e.Request, e.Dur = history.RequestRelease, dur
	return e
}

// delayed is agent's acquire refused for lock-delay, its reply back at at.
func delayed(at time.Duration, agent int) history.Event {
	e := ev(at, history.Denied, agent, 0, 0)
	e.Reason = leasefence.ReasonLockDelay
	return e
}

// lock is a library's mode that numbers its generations with its own
// fence: a lower one is one it granted earlier (history.Header.LateGrant).
const lock history.Mode = "lock"

// locked is e in mode lock.
func locked(e history.Event) history.Event {
	e.Mode = lock
	return e
}

// The coordinator's side, from what each child saw of it: only the parent,
// which sees every child's events, can tell that a grant ended the previous
// generation unrenewed, or that a grant is a replay.
func TestCoordinatorSide(t *testing.T) {
	tests := []struct {
		name string
		in   []history.Event
		want string // kind@at/agent/fence, in order
	}{
		{"a grant over a live generation expires it first",
			[]history.Event{ev(0, history.Granted, 0, 1, 1000*ms), ev(1200*ms, history.Granted, 1, 2, 2200*ms)},
			"granted@0s/0/1 expired@1.2s/0/1(1s) granted@1.2s/1/2"},
		{"a replayed grant mints nothing",
			[]history.Event{ev(0, history.Granted, 0, 1, 1000*ms), ev(10*ms, history.Granted, 0, 1, 1000*ms)},
			"granted@0s/0/1"},
		// The race of agents as processes (overlap on redis, --release
		// --agents 6 --ttl 200ms --think 1ms-5ms --stall 1ms-2ms): the
		// release reached the lock before the next grant, its answer came
		// back after it. Taken for an expiry at its deadline, it made a
		// mutual-exclusion violation of every such handover.
		{"a release that reached the coordinator before the next grant let it go",
			[]history.Event{ev(0, history.Granted, 0, 1, 1000*ms), sent(480*ms, 0, 1, 10*ms),
				ev(500*ms, history.Granted, 1, 2, 1500*ms), ev(510*ms, history.Released, 0, 1, 0)},
			"granted@0s/0/1 request_sent@480ms/0/1 released@490ms/0/1 granted@500ms/1/2"},
		{"a release that reached the coordinator after the next grant is its claim",
			[]history.Event{ev(0, history.Granted, 0, 1, 1000*ms), sent(480*ms, 0, 1, 30*ms),
				ev(500*ms, history.Granted, 1, 2, 1500*ms), ev(515*ms, history.Released, 0, 1, 0)},
			"granted@0s/0/1 request_sent@480ms/0/1 expired@500ms/0/1(1s) granted@500ms/1/2 released@515ms/0/1"},
		{"a release of a past generation with no send recorded is its claim",
			[]history.Event{ev(0, history.Granted, 0, 1, 1000*ms), ev(500*ms, history.Granted, 1, 2, 1500*ms), ev(510*ms, history.Released, 0, 1, 0)},
			"granted@0s/0/1 expired@500ms/0/1(1s) granted@500ms/1/2 released@510ms/0/1"},
		{"a refusal for lock-delay expires the live generation",
			[]history.Event{ev(0, history.Granted, 0, 1, 1000*ms), delayed(2000*ms, 1), ev(5000*ms, history.Granted, 1, 2, 6000*ms)},
			"granted@0s/0/1 expired@2s/0/1(1s) denied@2s/1/0 granted@5s/1/2"},
		// A process paused between its lock's answer and its report: the
		// lock granted fence 1 before fence 2, and the lab recorded it
		// after. Fence 2's lease is still the live one: nothing in the
		// record ends it at 1.2s, and its holder renews and releases it.
		{"a grant recorded late ends no lease",
			[]history.Event{locked(ev(0, history.Granted, 1, 2, 1000*ms)), locked(ev(1200*ms, history.Granted, 0, 1, 900*ms)),
				locked(ev(1300*ms, history.Extended, 1, 2, 2300*ms)), locked(ev(1400*ms, history.Released, 1, 2, 0)),
				locked(ev(1500*ms, history.Granted, 0, 3, 2500*ms))},
			"granted@0s/1/2 granted@1.2s/0/1 extended@1.3s/1/2 released@1.4s/1/2 granted@1.5s/0/3"},
		{"a grant below the newest of the lab's coordinator takes over",
			[]history.Event{ev(0, history.Granted, 1, 2, 1000*ms), ev(1200*ms, history.Granted, 0, 1, 2200*ms)},
			"granted@0s/1/2 expired@1.2s/1/2(1s) granted@1.2s/0/1"},
		{"an expiry is told once, with the last extension's deadline",
			[]history.Event{ev(0, history.Granted, 0, 1, 1000*ms), ev(400*ms, history.Extended, 0, 1, 1400*ms),
				ev(1500*ms, history.Expired, 0, 1, 0), ev(1600*ms, history.Expired, 0, 1, 0), ev(1700*ms, history.Granted, 1, 2, 2700*ms)},
			"granted@0s/0/1 extended@400ms/0/1 expired@1.5s/0/1(1.4s) granted@1.7s/1/2"},
	}
	h := history.Header{Modes: []history.Mode{lock}, Resources: []string{"res-1"},
		Contenders: []history.Contender{{Name: lock, Library: "a lock", Fence: true, Discipline: history.DisciplineFenced, Generations: realtime.GenerationsFence}}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range coordinatorSide(&h, tc.in) {
				s := fmt.Sprintf("%s@%v/%d/%d", e.Kind, e.At, e.Agent, e.Fence)
				if e.Kind == history.Expired {
					s += fmt.Sprintf("(%v)", e.Deadline)
				}
				got = append(got, s)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}

// A landing no process announced is an error naming the resource: the
// record and the reports disagree.
func TestLandingsNeedAnnouncements(t *testing.T) {
	var r reported
	if _, err := r.add(history.Event{Kind: history.CommitAdmitted, Agent: 0, Resource: 0, Other: -1, RequestID: "7"}, 0); err != nil {
		t.Fatal(err)
	}
	got, err := r.landings([][]realtime.Landing{{{ID: 7, At: 5 * ms}}}, []string{"res-1"}, time.Second)
	if err != nil || len(got) != 1 || got[0].At != 5*ms || got[0].RequestID != "7" {
		t.Fatalf("announced: %v, %v", got, err)
	}
	if _, err := r.landings([][]realtime.Landing{{{ID: 8, At: 5 * ms}}}, []string{"res-1"}, time.Second); err == nil || !strings.Contains(err.Error(), "res-1 records write 8") {
		t.Errorf("unannounced: %v", err)
	}
}

// Generations the processes numbered each from 1, as they saw their own
// grants, are numbered across the processes in the order the grants
// reached the parent; every later event of a lease carries its grant's
// number, and a crashed agent's next process numbers afresh without
// taking an old lease's number.
func TestObservedGenerationsNumberedAcrossProcesses(t *testing.T) {
	r := reported{observed: true}
	type in struct {
		e    history.Event
		life int
		want leasefence.Fence
	}
	for i, tc := range []in{
		{history.Event{Kind: history.Granted, Agent: 0, Fence: 1}, 0, 1},
		{history.Event{Kind: history.Granted, Agent: 1, Fence: 1}, 0, 2},
		{history.Event{Kind: history.Extended, Agent: 0, Fence: 1}, 0, 1},
		{history.Event{Kind: history.WriteLanded, Agent: 1, Fence: 1, RequestID: "9"}, 0, 2},
		{history.Event{Kind: history.Granted, Agent: 0, Fence: 1}, 1, 3}, // agent-1's second process
		{history.Event{Kind: history.Released, Agent: 0, Fence: 1}, 1, 3},
		{history.Event{Kind: history.Granted, Agent: 0, Fence: 2}, 0, 4},
		{history.Event{Kind: history.RequestSent, Agent: 1, Fence: 0}, 0, 0},
	} {
		got, err := r.add(tc.e, tc.life)
		if err != nil || got.Fence != tc.want {
			t.Errorf("event %d (%s of agent %d, process %d, fence %d): fence %d, %v; want %d", i, tc.e.Kind, tc.e.Agent, tc.life, tc.e.Fence, got.Fence, err, tc.want)
		}
	}
	if w := r.writes[9]; w.Fence != 2 {
		t.Errorf("the announced write keeps fence %d, want 2", w.Fence)
	}
	// A contender with fences of its own keeps them.
	own := reported{}
	if got, _ := own.add(history.Event{Kind: history.Granted, Agent: 1, Fence: 7}, 0); got.Fence != 7 {
		t.Errorf("a fence renumbered: %d", got.Fence)
	}
}

// An expiry the parent infers names its generation whole, incarnation and
// all, as the in-process runner's does: a history's reader finds a
// generation by (incarnation, resource, fence), and an expiry that named
// incarnation 0 for a lease of incarnation 1 ended nothing it knew.
func TestInferredExpiriesNameTheIncarnation(t *testing.T) {
	h := history.Header{Resources: []string{"res-1"}}
	inc := func(e history.Event) history.Event {
		e.Incarnation = 1
		return e
	}
	for _, tc := range []struct {
		name string
		in   []history.Event
	}{
		{"at the next grant", []history.Event{inc(ev(0, history.Granted, 0, 1, 1000*ms)), inc(ev(1200*ms, history.Granted, 1, 2, 2200*ms))}},
		{"at a refusal for lock-delay", []history.Event{inc(ev(0, history.Granted, 0, 1, 1000*ms)), delayed(2000*ms, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var expiries int
			for _, e := range coordinatorSide(&h, tc.in) {
				if e.Kind != history.Expired {
					continue
				}
				expiries++
				if e.Incarnation != 1 || e.Fence != 1 || e.Deadline != 1000*ms {
					t.Errorf("expiry %+v, want fence 1 of incarnation 1, deadline 1s", e)
				}
			}
			if expiries != 1 {
				t.Errorf("%d expiries, want 1", expiries)
			}
		})
	}
}

// A grant recorded late hides no takeover after it: the lock granted
// fence 2 at 100ms until 1.1s, fence 1 (made before it, until 50ms) came
// back late at 200ms, and fence 3 was granted at 500ms, fence 2 neither
// released nor expired. An expiry of fence 2 written at the late grant would excuse
// that violation.
func TestGrantRecordedLateHidesNoTakeover(t *testing.T) {
	h := history.Header{Backend: "hand", Modes: []history.Mode{lock}, Agents: []string{"agent-1", "agent-2", "agent-3"}, Resources: []string{"res-1"},
		TTL:        time.Second,
		Contenders: []history.Contender{{Name: lock, Library: "a lock", Fence: true, Discipline: history.DisciplineFenced, Generations: realtime.GenerationsFence}}}
	in := []history.Event{locked(ev(100*ms, history.Granted, 1, 2, 1100*ms)), locked(ev(200*ms, history.Granted, 0, 1, 50*ms)),
		locked(ev(500*ms, history.Granted, 2, 3, 1500*ms))}
	events := coordinatorSide(&h, in)
	for i := range events {
		events[i].Seq = uint64(i + 1)
	}
	r := history.Check(h, events).Modes[lock]
	if r.MutualExclusionViolations != 1 {
		t.Fatalf("%d mutual-exclusion violations, want 1: fence 3 granted at 500ms inside fence 2's lease (until 1.1s); events %+v", r.MutualExclusionViolations, events)
	}
}
