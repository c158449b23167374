package labtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/labtest"
	"github.com/leasefence/lab/spec"
)

// check is labtest.Check on a recorder, with the histories kept in a
// directory of the test's.
func check(t *testing.T, lock labtest.Lock, opts ...labtest.Option) (*labtest.BatteryResult, *recorder) {
	t.Helper()
	rec := &recorder{TB: t}
	res := labtest.Check(rec, lock, append([]labtest.Option{labtest.HistoryDir(t.TempDir())}, opts...)...)
	return res, rec
}

// A correct lock goes through the battery, fenced (its leases have a
// fence) and naive (they have none: the stale writes of its holders are
// the write path's finding, not a failure), with a line of progress per
// scenario, the restart left out with a note, and at least the coverage
// the package doc promises: the battery's floor, far below what a run
// gives (the counts are logged).
func TestCheckCorrectLock(t *testing.T) {
	t.Parallel()
	for _, fence := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "naive"}[fence], func(t *testing.T) {
			t.Parallel()
			lock := newMemLock()
			lock.noFence = !fence
			start := time.Now()
			res, rec := check(t, lock)
			took := time.Since(start)
			if failure := rec.failure(); failure != "" || res.Failed {
				t.Fatalf("a correct lock failed the battery: %s", failure)
			}
			t.Logf("the battery took %s", took)
			f := res.Findings
			if f.Lock.Verdict != history.FindingHeld || !strings.Contains(f.Lock.Reason, "kept the contract of Release after a lease's end and Renew after a lease's end") {
				t.Errorf("lock finding %+v: want held, the contract exercised", f.Lock)
			}
			if f.Coverage.Verdict != history.FindingHeld {
				t.Errorf("coverage %+v: want every property exercised", f.Coverage)
			}
			if want := map[bool]string{true: history.FindingHeld, false: history.FindingBroken}[fence]; f.Writes.Verdict != want {
				t.Errorf("writes finding %+v: want %s", f.Writes, want)
			}
			n := f.Coverage.Counts
			for _, c := range []struct {
				what       string
				got, floor int
			}{
				{"takeovers", n.Takeovers, labtest.BatteryFloor.Takeovers},
				{"expiries of live holders", n.ExpiriesOfLiveHolders, labtest.BatteryFloor.ExpiriesOfLiveHolders},
				{"contended grants", n.ContendedGrants, labtest.BatteryFloor.ContendedGrants},
				{"renewals", n.Renewals, labtest.BatteryFloor.Renewals},
				{"renewals after expiry", n.RenewalsAfterExpiry, labtest.BatteryFloor.RenewalsAfterExpiry},
				{"late releases", n.LateReleases, labtest.BatteryFloor.LateReleases},
				{"lost replies retried", n.LostRepliesRetried, labtest.BatteryFloor.LostRepliesRetried},
			} {
				if c.got < c.floor || c.floor == 0 {
					t.Errorf("%d %s over the battery: the floor is %d", c.got, c.what, c.floor)
				}
			}
			logged := rec.logged()
			for i, b := range spec.Battery() {
				if b.Name == "restart" {
					if !strings.Contains(logged, "restart: left out: contender lock: cannot play coordinator restarts") || len(res.LeftOut) != 1 {
						t.Errorf("the restart is not left out with a note: %v", res.LeftOut)
					}
					continue
				}
				if !strings.Contains(logged, b.Name+": lock held, writes ") || res.Scenarios[i].Mode != "lock" {
					t.Errorf("no line of progress for %s in %q", b.Name, logged)
				}
				// The live judgement never stops a correct lock's run.
				if r := res.Scenarios[i]; r.Stopped || r.Scenario != b.Name {
					t.Errorf("%s: the run of %s stopped %v", b.Name, r.Scenario, r.Stopped)
				}
			}
		})
	}
}

// Each broken lock fails the battery, its failure naming the property it
// broke and the scenario that caught it; none of them is one scripted
// action: the scenarios draw their faults. The battery stops at the first
// scenario that fails. A lock whose leases never end is never said to
// have kept exclusion: the battery is inconclusive, and fails with the
// reason.
func TestCheckCatchesBrokenLocks(t *testing.T) {
	t.Parallel()
	exclusion := history.ExclusionViolation[2:] // "the lock granted a resource while an earlier lease on it still ran"
	for _, tc := range []struct {
		name  string
		lock  func(*memLock)
		wants []string
	}{
		{"Release deletes the key whoever holds it (unconditional DEL)", func(l *memLock) { l.releaseDel = true },
			[]string{"the lock is broken", "release answered nil for a lease no longer live"}},
		{"Renew takes back a key it lost", func(l *memLock) { l.renewLost = true },
			[]string{"the lock is broken", "renewal sent after the lease had ended answered OK"}},
		{"grants twice when an acquire is retried after a lost reply", func(l *memLock) { l.reentrant = true },
			[]string{"the lock is broken", exclusion}},
		{"Renew and Release answer an error not matching ErrNotHeld", func(l *memLock) { l.plainLost = true },
			[]string{"the lock is broken", "errors that do not match ErrNotHeld"}},
		{"Acquire ignores its context", func(l *memLock) { l.heldWait = 4 * time.Second },
			[]string{"the lock is broken", "Acquire returned", "after its context's deadline: it does not honour its context"}},
		{"a lock that never expires", func(l *memLock) { l.neverExpires = true },
			[]string{"on the battery", "the lock finding is inconclusive: no lease ended without a release, so no takeover tested exclusion"}},
		{"Release answers nil for a key no longer held", func(l *memLock) { l.releaseNil = true },
			[]string{"the lock is broken", "release answered nil for a lease no longer live"}},
		// Caught by what it does first: a nil answer to the late copy of a
		// release, or the grant its release made possible.
		{"Release by the holder's name", func(l *memLock) { l.releaseByHolder = true },
			[]string{"the lock is broken", " on duplicates: "}},
		{"Deadline past the server's", func(l *memLock) { l.replyDeadline, l.serverAhead = true, 300*time.Millisecond },
			[]string{"the lock is broken", exclusion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lock := newMemLock()
			tc.lock(lock)
			res, rec := check(t, lock)
			failure := rec.failure()
			if !res.Failed || failure == "" {
				t.Fatalf("the broken lock passed the battery: %+v", res.Findings)
			}
			for _, want := range tc.wants {
				if !strings.Contains(failure, want) {
					t.Errorf("the failure lacks %q: %q", want, failure)
				}
			}
			named := false
			for _, b := range spec.Battery() {
				named = named || strings.Contains(failure, " on "+b.Name+": ") || strings.Contains(failure, "on the battery (")
			}
			if !named {
				t.Errorf("the failure names no scenario: %q", failure)
			}
			if last := res.Scenarios[len(res.Scenarios)-1]; res.Findings.Lock.Verdict == history.FindingBroken {
				if !last.Failed {
					t.Errorf("the battery went on past the scenario that failed")
				}
				checkKept(t, last, failure)
			}
		})
	}
}

// A scenario that restarts the coordinator is refused up front, naming
// what the lock cannot play, before the lock is called: the lab cannot
// restart a user's lock's server, and it is not the lock's failure.
func TestRunRefusesRestart(t *testing.T) {
	lock := &countingLock{memLock: newMemLock()}
	var fatal string
	res := labtest.Run(&fatalRecorder{TB: t, fatal: &fatal}, "restart-lost", lock)
	if res != nil || !strings.Contains(fatal, "contender lock: cannot play coordinator restarts (restarts) of restart-lost: the lab cannot restart a user's lock's server") {
		t.Errorf("result %v, failure %q: want the run refused, naming restarts", res, fatal)
	}
	if n := lock.acquires.Load(); n != 0 {
		t.Errorf("the lock was called %d times: want a refusal before anything runs", n)
	}
}
