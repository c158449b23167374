package labtest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/labtest"
	"github.com/leasefence/lab/realtime"
)

// stuckLock is memLock with one of its calls blocked until the test ends,
// whatever its context says: a lock with a deadlock of its own.
type stuckLock struct {
	*memLock
	call  string // "Acquire", "Renew" or "Release"
	probe bool   // on the probe's resource, else on any other
	stop  chan struct{}
}

func newStuckLock(t *testing.T, call string, probe bool) *stuckLock {
	l := &stuckLock{memLock: newMemLock(), call: call, probe: probe, stop: make(chan struct{})}
	// The blocked goroutines end with the test, not with Run.
	t.Cleanup(func() { close(l.stop) })
	return l
}

func (l *stuckLock) block(call, resource string) {
	if call == l.call && (resource == labtest.ProbeResource) == l.probe {
		<-l.stop
	}
}

func (l *stuckLock) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (labtest.Lease, error) {
	l.block("Acquire", resource)
	le, err := l.memLock.Acquire(ctx, resource, holder, ttl)
	if err != nil {
		return nil, err
	}
	return &stuckLease{memLease: le.(*memLease), l: l}, nil
}

type stuckLease struct {
	*memLease
	l *stuckLock
}

func (le *stuckLease) Renew(ctx context.Context) error {
	le.l.block("Renew", le.resource)
	return le.memLease.Renew(ctx)
}

func (le *stuckLease) Release(ctx context.Context) error {
	le.l.block("Release", le.resource)
	return le.memLease.Release(ctx)
}

const grace = 300 * time.Millisecond

// A lock that never returns from a call fails the run a grace after its
// duration, naming the agent, the call and the scenario, and the history
// keeps what the run recorded up to then, the call that never returned
// included, which lab check judges the same.
func TestLockThatNeverReturns(t *testing.T) {
	t.Parallel()
	// The correct lock passes the scenario (which ends no lease but by its
	// release, so tests no exclusion): the failures below are the stuck
	// calls'.
	if _, failure := run(t, "testdata/calls.yaml", newMemLock(), labtest.Grace(grace), labtest.AllowInconclusive()); failure != "" {
		t.Fatalf("the correct lock failed: %s", failure)
	}
	for _, tc := range []struct {
		call   string
		agent  string
		before history.Kind // an event the history holds from before the call
	}{
		{"Acquire", "agent-1", history.RequestSent},
		{"Renew", "agent-1", history.Acquired},
		{"Release", "agent-1", history.CommitAdmitted},
	} {
		t.Run(tc.call, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			res, failure := run(t, "testdata/calls.yaml", newStuckLock(t, tc.call, false), labtest.Grace(grace))
			took := time.Since(began)
			t.Logf("returned after %s: %s", took, failure)
			// 1s of run and its grace; a hang is go test's 10 minutes.
			if took > 15*time.Second {
				t.Errorf("Run took %s for a 1s run and a %s grace", took, grace)
			}
			want := "scenario calls: " + tc.agent + "'s " + tc.call + " of res-1 (mode lock)"
			if res.NeverReturned == nil || !errors.Is(res.NeverReturned, realtime.ErrNeverReturned) ||
				!strings.Contains(failure, want) || !strings.Contains(failure, "never returned") {
				t.Fatalf("failure %q: want it to say %q never returned", failure, want)
			}
			checkKept(t, res, failure)
			h, events, err := history.ReadFile(res.HistoryPath)
			if err != nil {
				t.Fatal(err)
			}
			var before, stuck bool
			for _, e := range events {
				before = before || e.Kind == tc.before
				stuck = stuck || e.Kind == history.LibraryError && strings.Contains(e.Detail, tc.agent+": "+tc.call+" of res-1 never returned")
			}
			if !before || !stuck {
				t.Errorf("the kept history has a %s: %v, the call that never returned: %v", tc.before, before, stuck)
			}
			if again := history.Check(h, events); !again.Failed() {
				t.Errorf("lab check passes the kept history")
			}
		})
	}
}

// A probe that never returns fails Run a grace after the probe's own
// bound, and names the call; no run is made.
func TestProbeThatNeverReturns(t *testing.T) {
	t.Parallel()
	for _, call := range []string{"Acquire", "Release"} {
		t.Run(call, func(t *testing.T) {
			t.Parallel()
			var fatal string
			dir := t.TempDir()
			began := time.Now()
			labtest.Run(&fatalRecorder{TB: t, fatal: &fatal}, "testdata/calls.yaml", newStuckLock(t, call, true),
				labtest.Grace(grace), labtest.HistoryDir(dir))
			took := time.Since(began)
			// The probe's bound is 10s (ten TTLs, at least 10s).
			if took > 25*time.Second {
				t.Errorf("Run took %s", took)
			}
			if want := "the probe's " + call + " of " + labtest.ProbeResource + " never returned"; !strings.Contains(fatal, want) {
				t.Fatalf("got %q, want %q", fatal, want)
			}
			if files, _ := os.ReadDir(dir); len(files) != 0 {
				t.Errorf("a run that never began kept %d files", len(files))
			}
		})
	}
}
