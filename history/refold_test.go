package history_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// The checker's counters must equal a second fold of the same events,
// written the slow and obvious way: every event kept, each counter derived
// by scanning the whole mode's history, nothing shared with the checker but
// the event types. It runs over recorded runs of every contender the lab
// can record here: the simulator's naive and fenced on every built-in
// scenario, the real-time runner's naive, fenced and a library-style lock
// on the memory backend, the kept run of redsync, redislock and fenced on
// Redis, and every hand-made history of testdata.
func TestCountersEqualASecondFold(t *testing.T) {
	var sum foldCounts // over every run: the runs must put each counter to the test
	realTakeovers := 0
	for _, rec := range recordedRuns(t) {
		for _, m := range rec.h.Modes {
			events := rec.byMode[m]
			want := refold(&rec.h, events)
			sum.stale += want.stale
			sum.exclusion += want.exclusion
			sum.takeovers += want.takeovers
			sum.extended += want.extended
			sum.idleMS += want.idleMS
			if strings.HasPrefix(rec.name, "memory/") {
				realTakeovers += want.takeovers
			}
			t.Run(rec.name+"/"+string(m), func(t *testing.T) {
				rep := history.Check(rec.h, events).Modes[m]
				got := foldCounts{
					acquisitions: rep.Acquisitions, renewals: rep.Renewals, denials: rep.Denials, expiries: rep.Expiries,
					releases: rep.Releases, minted: rep.FencesMinted, retries: rep.Retries, lost: rep.MessagesLost,
					checksFailed: rep.ChecksFailed, pushes: rep.PushesApplied, writesFailed: rep.WritesFailed,
					admitted: rep.CommitsAdmitted, refused: rep.CommitsRefused, stale: rep.StaleWritesLanded,
					exclusion: rep.MutualExclusionViolations, takeovers: rep.Takeovers, extended: want.extended,
					idleMS: rep.IdleWhileWaitingMS,
				}
				if got != want {
					t.Errorf("the checker counts %+v\nthe second fold  %+v\n%s", got, want, keep(t, rec.h, m, events))
				}
			})
		}
	}
	if sum.stale == 0 || sum.exclusion == 0 || sum.takeovers == 0 || sum.extended == 0 || sum.idleMS == 0 || realTakeovers == 0 {
		t.Errorf("the recorded runs leave a counter untested: %+v, %d takeovers in real time", sum, realTakeovers)
	}
}

// keep writes mode m's events, on which both folds disagree, as a history
// of that mode alone to a file named for the test: a disagreement only
// some interleavings of a real-time run produce can then be replayed
// (`lab check` reads it), and a copy under testdata keeps it checked here.
func keep(t *testing.T, h history.Header, m history.Mode, events []history.Event) string {
	h.Modes = []history.Mode{m}
	path := filepath.Join(os.TempDir(), "refold-"+strings.ReplaceAll(t.Name(), "/", "-")+".jsonl")
	f, err := os.Create(path)
	if err != nil {
		return "the history was not kept: " + err.Error()
	}
	enc, err := history.NewEncoder(f, h)
	for i := 0; err == nil && i < len(events); i++ {
		err = enc.Encode(&events[i])
	}
	if err == nil {
		err = enc.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "the history was not kept: " + err.Error()
	}
	return "the history is kept in " + path
}

// foldCounts are the counters both folds derive.
type foldCounts struct {
	acquisitions, renewals, denials, expiries, releases, minted, retries, lost int
	checksFailed, pushes, writesFailed, admitted, refused, stale               int
	exclusion, takeovers                                                       int
	idleMS                                                                     int
	// extended counts the extensions the lock granted: not a counter of
	// the checker's, but what puts the renewal arm of the rule to the test.
	extended int
}

// refold derives the counters of one mode's events by scanning them.
func refold(h *history.Header, events []history.Event) foldCounts {
	var c foldCounts
	for i := range events {
		e := &events[i]
		switch e.Kind {
		case history.Acquired:
			c.acquisitions++
		case history.Renewed:
			c.renewals++
		case history.Denied:
			c.denials++
		case history.Expired:
			c.expiries++
		case history.Released:
			c.releases++
		case history.Granted:
			c.minted++
			prev := previousGrant(h, events, i)
			switch {
			case prev < 0:
			case h.LateGrant(e.Mode, e.Fence, events[prev].Fence):
				// Made before prev, recorded after it: prev, granted
				// before this lease's stated end, took over from it.
				c.exclusion += btoi(events[prev].At < e.Deadline)
			default:
				c.takeovers += btoi(!releasedBetween(events, prev, i))
				c.exclusion += btoi(grantedTwice(h, events, prev, i))
			}
		case history.Extended:
			c.extended++
		case history.RequestRetried:
			c.retries++
		case history.RequestDropped, history.ReplyDropped:
			c.lost++
		case history.CheckFailed:
			c.checksFailed++
		case history.AdmitPushed:
			c.pushes++
		case history.WriteFailed:
			c.writesFailed++
		case history.CommitAdmitted, history.WriteLanded:
			c.admitted++
			c.stale += btoi(landedStale(events, i))
		case history.CommitRefused:
			c.refused++
		}
	}
	c.idleMS = int(idleWhileWaiting(events).Milliseconds())
	return c
}

// idleWhileWaiting sums, over the lock-delay denials of a resource no
// lease held that no such denial since it was last freed came before, the time from
// the denial to the resource's next grant (or the history's last event).
func idleWhileWaiting(events []history.Event) time.Duration {
	var idle time.Duration
	for i, e := range events {
		if !lockDelayed(e) || !freeAt(events, i) || waitedBefore(events, i) {
			continue
		}
		end := events[len(events)-1].At
		for _, f := range events[i+1:] {
			if f.Kind == history.Granted && f.Resource == e.Resource {
				end = f.At
				break
			}
		}
		idle += end - e.At
	}
	return idle
}

func lockDelayed(e history.Event) bool {
	return e.Kind == history.Denied && e.Reason == leasefence.ReasonLockDelay
}

// freeAt reports whether no lease held events[i]'s resource: the last
// grant, expiry, release or restart before it is not a grant.
func freeAt(events []history.Event, i int) bool {
	for j := i - 1; j >= 0; j-- {
		f := events[j]
		if f.Kind == history.CoordinatorRestarted {
			return true
		}
		if f.Resource != events[i].Resource {
			continue
		}
		switch f.Kind {
		case history.Granted:
			return false
		case history.Expired, history.Released:
			return true
		}
	}
	return true
}

// waitedBefore reports whether a denial of the free resource came before
// events[i] since the resource was last freed: then the wait began there.
func waitedBefore(events []history.Event, i int) bool {
	for j := i - 1; j >= 0; j-- {
		f := events[j]
		if f.Kind == history.CoordinatorRestarted {
			return false
		}
		if f.Resource != events[i].Resource {
			continue
		}
		switch f.Kind {
		case history.Granted, history.Expired, history.Released:
			return false
		case history.Denied:
			if lockDelayed(f) && freeAt(events, j) {
				return true
			}
		}
	}
	return false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// previousGrant is the grant of the same resource before events[i], or
// -1; for a library's lock, the newest of them in its own order (of equal
// generations, the last recorded): a grant recorded late took over nothing.
func previousGrant(h *history.Header, events []history.Event, i int) int {
	own := h.Contender(events[i].Mode).Generations != ""
	found := -1
	for j := i - 1; j >= 0; j-- {
		if events[j].Kind != history.Granted || events[j].Resource != events[i].Resource {
			continue
		}
		if !own {
			return j
		}
		if found < 0 || events[j].Fence > events[found].Fence {
			found = j
		}
	}
	return found
}

// releasedBetween: the lease granted at events[g] was released before the
// grant at events[i].
func releasedBetween(events []history.Event, g, i int) bool {
	for _, e := range events[g+1 : i] {
		if e.Kind == history.Released && e.Resource == events[g].Resource && e.Fence == events[g].Fence {
			return true
		}
	}
	return false
}

// grantedTwice: the grant at events[i] came while the lease granted at
// events[g] still ran: not released, not ended (expired, or forgotten by a
// coordinator restart) before the grant's instant, and granted before the
// earliest instant that lease's record allows it to have ended.
func grantedTwice(h *history.Header, events []history.Event, g, i int) bool {
	at := events[i].At
	if releasedBetween(events, g, i) {
		return false
	}
	for _, e := range events[g+1 : i] {
		ended := e.Kind == history.Expired && e.Resource == events[g].Resource && e.Fence == events[g].Fence ||
			e.Kind == history.CoordinatorRestarted
		if ended {
			if e.At < at {
				return false
			}
			if e.Kind == history.Expired {
				break // the first end the lock said is the one that counts
			}
		}
	}
	return at < leaseEnd(h, events, g, i)
}

// leaseEnd is the latest of the earliest ends the grant at events[g] and
// each extension of it before events[i] allow.
func leaseEnd(h *history.Header, events []history.Event, g, i int) time.Duration {
	real := h.Backend != "" && h.Backend != "sim"
	grant := events[g]
	end := grant.Deadline
	if real {
		// The acquire that won it can have reached the server no earlier
		// than its earliest copy sent since the id was last answered.
		end = earliest(grant, events[:g], func(e *history.Event) (match, reset bool) {
			return e.Kind == history.RequestSent && e.Request == history.RequestAcquire && e.RequestID == grant.RequestID,
				(e.Kind == history.Denied || e.Kind == history.AcquireAbandoned || e.Kind == history.Granted) && e.RequestID == grant.RequestID
		})
	}
	from := g // renewals count from the grant, then from each extension
	for j := g + 1; j < i; j++ {
		x := events[j]
		if x.Kind != history.Extended || x.Resource != grant.Resource || x.Fence != grant.Fence {
			continue
		}
		ext := x.Deadline
		if real {
			ext = earliest(x, events[from+1:j], func(e *history.Event) (match, reset bool) {
				return e.Kind == history.RequestSent && e.Request == history.RequestRenew && e.Resource == x.Resource && e.Fence == x.Fence, false
			})
		}
		end = max(end, ext)
		from = j
	}
	return end
}

// earliest is rec's deadline less the time from the earliest arrival (send
// plus its stated delay) of the sends among before that match, since the
// last that resets, to rec's record; rec's deadline when none can have
// arrived before it.
func earliest(rec history.Event, before []history.Event, sent func(*history.Event) (match, reset bool)) time.Duration {
	arrival, found := time.Duration(0), false
	for k := range before {
		match, reset := sent(&before[k])
		if reset {
			found = false
		}
		if a := before[k].At + max(before[k].Dur, 0); match && (!found || a < arrival) {
			arrival, found = a, true
		}
	}
	if !found || arrival > rec.At {
		return rec.Deadline
	}
	return rec.Deadline - (rec.At - arrival)
}

// landedStale: the landing at events[i] came after a landing, on the same
// resource, of a lease generation granted later than the writer's.
func landedStale(events []history.Event, i int) bool {
	w := events[i]
	mine := grantOf(events, i, w)
	if mine < 0 {
		return false
	}
	for j := range i {
		o := events[j]
		if (o.Kind == history.CommitAdmitted || o.Kind == history.WriteLanded) && o.Resource == w.Resource && grantOf(events, j, o) > mine {
			return true
		}
	}
	return false
}

// grantOf is the index of the latest grant before events[i] of w's
// incarnation, resource and fence, or -1.
func grantOf(events []history.Event, i int, w history.Event) int {
	for j := i - 1; j >= 0; j-- {
		g := events[j]
		if g.Kind == history.Granted && g.Resource == w.Resource && g.Fence == w.Fence && g.Incarnation == w.Incarnation {
			return j
		}
	}
	return -1
}

// recorded is one recorded run: its header and each mode's events.
type recorded struct {
	name   string
	h      history.Header
	byMode map[history.Mode][]history.Event
}

func newRecorded(name string, h history.Header) *recorded {
	return &recorded{name: name, h: h, byMode: make(map[history.Mode][]history.Event)}
}

// Event implements history.Subscriber; a real-time runner calls it from
// one goroutine at a time, in history order.
func (r *recorded) Event(e history.Event) { r.byMode[e.Mode] = append(r.byMode[e.Mode], e) }

func recordedRuns(t *testing.T) []*recorded {
	// The real-time runs wait on the wall clock: they run while the
	// simulator keeps a core busy.
	realTime := []struct {
		scenario string
		d        time.Duration
		rec      *recorded
		err      error
	}{{scenario: "gap", d: 3 * time.Second}, {scenario: "overlap", d: 2 * time.Second}}
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range realTime {
		r := &realTime[i]
		wg.Go(func() { r.rec, r.err = realTimeRun(t.Context(), r.scenario, r.d) })
	}
	var out []*recorded
	for _, name := range spec.BuiltinNames() {
		for seed := uint64(1); seed <= 2; seed++ {
			sc, _ := spec.Builtin(name)
			sc.Seed = seed
			rec := newRecorded(fmt.Sprintf("sim/%s/seed-%d", name, seed), sc.Header(harness.Modes))
			if _, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}}); err != nil {
				t.Fatal(err)
			}
			out = append(out, rec)
		}
	}
	// lock-delay with a delay: its idle time.
	sc := spec.LockDelayScenario()
	sc.LockDelay = 2 * time.Second
	rec := newRecorded("sim/lock-delay-2s", sc.Header(harness.Modes))
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}}); err != nil {
		t.Fatal(err)
	}
	out = append(out, rec)
	// gap's script hands the lease over under a stalled holder, so every
	// mode of it has a takeover; overlap's draws do the rest.
	wg.Wait()
	for _, r := range realTime {
		if r.err != nil {
			t.Fatalf("the real-time run of %s: %v", r.scenario, r.err)
		}
		out = append(out, r.rec)
	}
	files, err := filepath.Glob("testdata/*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, "../cmd/lab/testdata/redis-locks-paused-holder.jsonl") {
		h, events, err := history.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorded("file/"+filepath.Base(f), h)
		for _, e := range events {
			rec.Event(e)
		}
		out = append(out, rec)
	}
	return out
}

// realTimeRun records the built-in scenario for d on the memory backend:
// the lab's naive and fenced, and ttl, a lock of the kind a library gives
// (its own deadlines, no fence), side by side.
func realTimeRun(ctx context.Context, scenario string, d time.Duration) (*recorded, error) {
	sc, _ := spec.Builtin(scenario)
	sc.Duration = d
	ttl := &realtime.Contender{Info: history.Contender{Name: "ttl", Library: "test", Discipline: history.DisciplineNaive, Generations: "observed"},
		New: func(context.Context, history.Mode) (realtime.Lock, error) {
			return &ttlLock{held: map[string]*ttlLease{}}, nil
		}}
	rec := &recorded{name: "memory/" + scenario, byMode: make(map[history.Mode][]history.Event)}
	r, err := realtime.New(sc, realtime.Options{Modes: []history.Mode{history.Naive, history.Fenced, "ttl"}, Backend: realtime.NewMemory(),
		Contenders: map[history.Mode]*realtime.Contender{"ttl": ttl}, Subscribers: []history.Subscriber{rec}})
	if err != nil {
		return nil, err
	}
	rec.h = r.Header()
	if _, err := r.Run(ctx); err != nil {
		return nil, err
	}
	return rec, ttl.Close()
}

// ttlLock is a lock on its own clock: a lease runs its TTL from its grant,
// and a renewal or release of one no longer held fails.
type ttlLock struct {
	mu   sync.Mutex
	held map[string]*ttlLease
}

var errNotHeld = errors.New("ttl: the lease is no longer held")

type ttlLease struct {
	l        *ttlLock
	resource string
	until    time.Time
	ttl      time.Duration
}

func (l *ttlLock) Acquire(_ context.Context, resource, _ string, ttl time.Duration) (realtime.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.held[resource]; cur != nil && time.Now().Before(cur.until) {
		return nil, realtime.ErrHeld
	}
	le := &ttlLease{l: l, resource: resource, until: time.Now().Add(ttl), ttl: ttl}
	l.held[resource] = le
	return le, nil
}

func (le *ttlLease) Deadline() time.Time {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	return le.until
}

func (le *ttlLease) Fence() (uint64, bool) { return 0, false }

func (le *ttlLease) Renew(context.Context) error {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	if le.l.held[le.resource] != le || !time.Now().Before(le.until) {
		return errNotHeld
	}
	le.until = time.Now().Add(le.ttl)
	return nil
}

func (le *ttlLease) Release(context.Context) error {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	if le.l.held[le.resource] != le {
		return errNotHeld
	}
	delete(le.l.held, le.resource)
	return nil
}
