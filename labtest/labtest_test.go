package labtest_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/labtest"
	"github.com/leasefence/lab/realtime/sqlitestore"
)

// recorder is a testing.TB whose Errorf is kept, so that a test can see
// Run fail.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	logs   []string
}

func (r *recorder) Logf(format string, args ...any) {
	r.TB.Helper()
	r.TB.Logf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) logged() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.logs, "\n")
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) failure() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

// run is labtest.Run on a recorder, with the history kept in a directory
// of the test's.
func run(t *testing.T, sc string, lock labtest.Lock, opts ...labtest.Option) (*labtest.Result, string) {
	t.Helper()
	rec := &recorder{TB: t}
	res := labtest.Run(rec, sc, lock, append([]labtest.Option{labtest.HistoryDir(t.TempDir())}, opts...)...)
	return res, rec.failure()
}

func TestCorrectLockPassesFenced(t *testing.T) {
	t.Parallel()
	for _, sc := range []string{"overlap", "testdata/stalls.yaml", "testdata/late-release.yaml"} {
		t.Run(sc, func(t *testing.T) {
			t.Parallel()
			var opts []labtest.Option
			switch sc {
			case "overlap":
				opts = append(opts, labtest.Duration(6*time.Second))
			case "testdata/stalls.yaml":
				// Its leases lapse every second or so: 15s of its 60s
				// put the lock through a dozen of them.
				opts = append(opts, labtest.Duration(15*time.Second))
			case "testdata/late-release.yaml":
				// No lease ends but by its release: nothing tests
				// exclusion, which a run must be allowed to leave so.
				opts = append(opts, labtest.AllowInconclusive())
			}
			res, failure := run(t, sc, newMemLock(), opts...)
			if failure != "" {
				t.Fatalf("a correct lock failed: %s", failure)
			}
			if res.Mode != "lock" || res.Contender.Discipline != history.DisciplineFenced || !res.Contender.Fence || res.Contender.Generations != "fence" {
				t.Errorf("ran %s, contender %+v: want fenced on its own fence", res.Mode, res.Contender)
			}
			if min := map[bool]int{true: 2, false: 5}[sc == "testdata/late-release.yaml"]; res.Acquisitions < min || res.CommitsAdmitted < 1 {
				t.Errorf("only %d acquisitions, %d writes landed: the run did not exercise the lock", res.Acquisitions, res.CommitsAdmitted)
			}
			if _, err := os.Stat(res.HistoryPath); !os.IsNotExist(err) {
				t.Errorf("a passing run kept its history %s (%v)", res.HistoryPath, err)
			}
		})
	}
}

// A correct lock written to naively, on a scenario whose holders stall
// past the TTL, lands stale writes: the lock is fine, the discipline is
// not. The findings say so apart: the lock held, the writes broken with
// the remedy, and the test passes unless it asks for no stale writes.
// The lab's numbers of the grants it observed are never called fences.
func TestNaiveDisciplineLandsStaleWrites(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "RequireNoStaleWrites"}[strict], func(t *testing.T) {
			t.Parallel()
			lock := newMemLock()
			lock.noFence = true
			opts := []labtest.Option{labtest.Duration(8 * time.Second)}
			if strict {
				opts = append(opts, labtest.RequireNoStaleWrites())
			}
			res, failure := run(t, "overlap", lock, opts...)
			if res.Contender.Discipline != history.DisciplineNaive || res.Contender.Generations != "observed" {
				t.Errorf("ran %+v: want naive, numbered as observed", res.Contender)
			}
			f := res.Findings
			if res.StaleWritesLanded == 0 || f.Writes.Verdict != history.FindingBroken ||
				!strings.Contains(f.Writes.Reason, "your lock kept exclusion; writes without a fence landed") ||
				!strings.Contains(f.Writes.Reason, "the remedy: write through a gate") {
				t.Fatalf("%d stale writes, writes finding %+v", res.StaleWritesLanded, f.Writes)
			}
			if f.Lock.Verdict != history.FindingHeld || res.MutualExclusionViolations != 0 {
				t.Errorf("a correct lock: lock finding %+v, %d mutual-exclusion violations: %+v", f.Lock, res.MutualExclusionViolations, res.MutualExclusion)
			}
			for _, x := range res.Counterexamples {
				if strings.Contains(x.Detail, "fence") {
					t.Errorf("an observed generation printed as a fence: %s", x.Detail)
				}
			}
			if !strict {
				if failure != "" || res.Failed {
					t.Fatalf("a correct lock's naive stale writes failed the test: %q", failure)
				}
				return
			}
			if !strings.Contains(failure, "the writes are broken: your lock kept exclusion") {
				t.Fatalf("RequireNoStaleWrites: the stale writes did not fail the test: %q", failure)
			}
			checkKept(t, res, failure)
		})
	}
}

// The lease contract, each rule with a lock that breaks it, on a scenario
// whose holder renews and releases its lease after another took the
// resource over: a correct lock refuses both with ErrNotHeld and passes;
// each broken one fails, naming what it broke; a lock whose leases never
// end is never said to have kept exclusion.
func TestLeaseContract(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lock  func(*memLock)
		opts  []labtest.Option
		wants []string // in the failure; none: the run passes
	}{
		{"correct", func(*memLock) {}, nil, nil},
		{"Renew answers nil for a key it lost", func(l *memLock) { l.renewLost = true }, nil,
			[]string{"the lock is broken", "renewal sent after the lease had ended answered OK"}},
		{"Release answers nil for a key no longer held", func(l *memLock) { l.releaseNil = true }, nil,
			[]string{"the lock is broken", "release answered nil for a lease no longer live"}},
		{"Release deletes the key whoever holds it", func(l *memLock) { l.releaseDel = true }, nil,
			[]string{"the lock is broken", "mutual-exclusion violation", "release answered nil for a lease no longer live"}},
		{"Renew and Release answer an error not matching ErrNotHeld", func(l *memLock) { l.plainLost = true }, nil,
			[]string{"the lock is broken", "to Renew or Release of a lease that had ended were errors that do not match ErrNotHeld"}},
		{"a lock that never expires", func(l *memLock) { l.neverExpires = true }, nil,
			[]string{"the lock finding is inconclusive: no lease ended without a release, so no takeover tested exclusion"}},
		{"a lock that never expires, inconclusive allowed", func(l *memLock) { l.neverExpires = true }, []labtest.Option{labtest.AllowInconclusive()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lock := newMemLock()
			tc.lock(lock)
			res, failure := run(t, "testdata/after-end.yaml", lock, tc.opts...)
			if len(tc.wants) == 0 {
				if failure != "" {
					t.Fatalf("failed: %s", failure)
				}
				if n := res.Findings.Coverage.Counts; tc.name == "correct" && (n.LateReleases == 0 || n.RenewalsAfterExpiry == 0 || n.Takeovers == 0 ||
					res.Findings.Lock.Verdict != history.FindingHeld || !strings.Contains(res.Findings.Lock.Reason, "kept the contract of Release after a lease's end and Renew after a lease's end")) {
					t.Errorf("the scenario did not exercise the contract: %+v, lock %+v", n, res.Findings.Lock)
				}
				return
			}
			for _, want := range tc.wants {
				if !strings.Contains(failure, want) {
					t.Errorf("the failure lacks %q: %q", want, failure)
				}
			}
			if !strings.Contains(failure, "after-end") {
				t.Errorf("the failure does not name the scenario: %q", failure)
			}
			checkKept(t, res, failure)
		})
	}
}

func TestBrokenLocksFail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sc   string
		opts []labtest.Option
		min  int // mutual-exclusion violations: the run stops at the first
		lock func() *memLock
	}{
		{"release keyed by holder name", "testdata/late-release.yaml", nil, 1, func() *memLock {
			l := newMemLock()
			l.releaseByHolder = true
			return l
		}},
		{"deadline taken from the reply", "testdata/stalls.yaml", []labtest.Option{labtest.Duration(10 * time.Second)}, 1, func() *memLock {
			l := newMemLock()
			l.replyDeadline, l.serverAhead = true, 300*time.Millisecond
			return l
		}},
		// Past the first counterexample, on to the run's end.
		{"deadline taken from the reply, KeepGoing", "testdata/stalls.yaml", []labtest.Option{labtest.Duration(10 * time.Second), labtest.KeepGoing()}, 3, func() *memLock {
			l := newMemLock()
			l.replyDeadline, l.serverAhead = true, 300*time.Millisecond
			return l
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res, failure := run(t, tc.sc, tc.lock(), tc.opts...)
			took := time.Since(start)
			t.Logf("%d mutual-exclusion violations, %d stale writes, %d refused, in %s", res.MutualExclusionViolations, res.StaleWritesLanded, res.CommitsRefused, took)
			// The run stops at its first counterexample unless told to
			// go on: well before the 10s of stalls.yaml here.
			if keepGoing := strings.HasSuffix(tc.name, "KeepGoing"); tc.sc == "testdata/stalls.yaml" && (res.Stopped == keepGoing || (!keepGoing && took > 7*time.Second)) {
				t.Errorf("stopped %v after %s (KeepGoing %v)", res.Stopped, took, keepGoing)
			}
			if res.MutualExclusionViolations < tc.min || !strings.Contains(failure, "mutual-exclusion violation") {
				t.Fatalf("the broken lock passed (%d mutual-exclusion violations): %q", res.MutualExclusionViolations, failure)
			}
			// The fence keeps the resource safe: the gate refused what
			// the lock let through.
			if res.StaleWritesLanded != 0 {
				t.Errorf("%d stale writes landed through the gate", res.StaleWritesLanded)
			}
			checkKept(t, res, failure)
		})
	}
}

// checkKept: a failed run names its history file, which holds the run.
func checkKept(t *testing.T, res *labtest.Result, failure string) {
	t.Helper()
	if !res.Failed || !strings.Contains(failure, res.HistoryPath) {
		t.Errorf("the failure does not name the history %s: %q", res.HistoryPath, failure)
	}
	h, events, err := history.ReadFile(res.HistoryPath)
	if err != nil {
		t.Fatalf("the kept history: %v", err)
	}
	again := history.Check(h, events).Modes[res.Mode]
	if again.StaleWritesLanded != res.StaleWritesLanded {
		t.Errorf("lab check finds %d stale writes, the run %d", again.StaleWritesLanded, res.StaleWritesLanded)
	}
	if again.Findings.Lock.Verdict != res.Findings.Lock.Verdict || again.Findings.Writes.Verdict != res.Findings.Writes.Verdict {
		t.Errorf("lab check finds lock %s, writes %s; the run %s, %s", again.Findings.Lock.Verdict, again.Findings.Writes.Verdict,
			res.Findings.Lock.Verdict, res.Findings.Writes.Verdict)
	}
	if n, _ := history.MutualExclusion(&h, events); n != res.MutualExclusionViolations {
		t.Errorf("the file shows %d mutual-exclusion violations, the run %d", n, res.MutualExclusionViolations)
	}
	if c := h.Contender(res.Mode); !reflect.DeepEqual(c, res.Contender) {
		t.Errorf("the file's header names contender %+v, want %+v", c, res.Contender)
	}
}

func TestFencedWithoutFenceIsRefused(t *testing.T) {
	lock := newMemLock()
	lock.noFence = true
	var fatal string
	ft := &fatalRecorder{TB: t, fatal: &fatal}
	done := make(chan struct{})
	go func() {
		defer close(done)
		labtest.Run(ft, "overlap", lock, labtest.Fenced())
	}()
	<-done
	if !strings.Contains(fatal, "cannot run fenced") {
		t.Fatalf("Fenced on a lock without a fence: %q", fatal)
	}
}

type fatalRecorder struct {
	testing.TB
	fatal *string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) { *f.fatal = fmt.Sprintf(format, args...) }

// A user's lock keeps its own time on its own server: a scenario that
// drifts the lab coordinator's clock is refused before the lock is called,
// naming the scenario's field, as lab run refuses it for a library's
// contender. Played, it judged the lock on the lab's drifted clock.
func TestCoordinatorDriftRefused(t *testing.T) {
	lock := &countingLock{memLock: newMemLock()}
	var fatal string
	res := labtest.Run(&fatalRecorder{TB: t, fatal: &fatal}, "testdata/coordinator-drift.yaml", lock)
	if res != nil || !strings.Contains(fatal, "contender lock: cannot play the lab coordinator's clock drift") ||
		!strings.Contains(fatal, "(clocks.coordinator_drift_ppm) of coordinator-drift") {
		t.Errorf("result %v, failure %q: want the run refused, naming the lock and clocks.coordinator_drift_ppm", res, fatal)
	}
	if n := lock.acquires.Load(); n != 0 {
		t.Errorf("the lock was called %d times: want a refusal before anything runs", n)
	}
}

// countingLock is memLock counting its Acquires.
type countingLock struct {
	*memLock
	acquires atomic.Int64
}

func (l *countingLock) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (labtest.Lease, error) {
	l.acquires.Add(1)
	return l.memLock.Acquire(ctx, resource, holder, ttl)
}

func TestUnknownScenario(t *testing.T) {
	var fatal string
	labtest.Run(&fatalRecorder{TB: t, fatal: &fatal}, "no-such-scenario", newMemLock())
	if !strings.Contains(fatal, "neither a built-in") || !strings.Contains(fatal, "overlap") {
		t.Fatalf("got %q", fatal)
	}
}

// On a real store the gate is SQLite's: the stalled holder's write is
// refused there, and the landings come from its table.
func TestSQLiteStore(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.NewSQLiteStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	res, failure := run(t, "testdata/paused-holder.yaml", newMemLock(), labtest.Store(st))
	if failure != "" {
		t.Fatalf("a correct fenced lock failed on SQLite: %s", failure)
	}
	if res.CommitsAdmitted != 1 || res.CommitsRefused != 1 {
		t.Errorf("paused-holder on SQLite: %d admitted, %d refused: want agent-2's write landed, agent-1's refused", res.CommitsAdmitted, res.CommitsRefused)
	}
}
