package realtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/spec"
)

// faultyMemory is the in-memory backend playing the faults list as a
// backend's adapter would: each fault strikes "server N", or cannot
// begin (begin), or ends having missed what it was for (end).
type faultyMemory struct {
	*realtime.Memory
	begin, end error

	mu     sync.Mutex
	active int // faults in force
}

func (b *faultyMemory) BeginFault(_ context.Context, f spec.TimedFault) (realtime.ActiveFault, error) {
	if b.begin != nil {
		return nil, b.begin
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active++
	return &struck{b: b, f: f}, nil
}

type struck struct {
	b *faultyMemory
	f spec.TimedFault
}

func (s *struck) Began() (string, string) { return "server 2", "slowly" }

func (s *struck) End(context.Context) realtime.FaultOutcome {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.active--
	return realtime.FaultOutcome{Detail: "server 3 took over", Outcome: history.OutcomeFailedOver, Err: s.b.end}
}

// The runner plays every entry of the faults list through the backend's
// FaultPlayer alike, and records each by its fault_began and fault_ended
// alone, at one instant in every mode: what it struck and how, and what it
// did. A fault that cannot begin is recorded not played and fails the
// run, and so does one that did not do what it was for, or a backend that
// plays no fault at all; each error names the entry.
func TestTimedFaults(t *testing.T) {
	t.Parallel()
	sc := runtest.Short(t, "overlap", time.Second, 1)
	sc.Faults = []spec.TimedFault{{At: 200 * time.Millisecond, Do: spec.FaultPauseLeader, Duration: 300 * time.Millisecond}}
	missed := errors.New("no server took over")
	for _, tc := range []struct {
		name    string
		backend realtime.Backend
		err     string // "" for none
		played  bool
	}{
		{"played", &faultyMemory{Memory: realtime.NewMemory()}, "", true},
		{"cannot begin", &faultyMemory{Memory: realtime.NewMemory(), begin: errors.New("no leader")}, "faults[0]: pause_leader at 200ms: not applied: no leader", false},
		{"missed", &faultyMemory{Memory: realtime.NewMemory(), end: missed}, "faults[0]: pause_leader at 200ms: no server took over", true},
		{"plays none", realtime.NewMemory(), "backend memory plays no fault of the faults list", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var events []history.Event
			r, err := realtime.New(sc, realtime.Options{Backend: tc.backend, Subscribers: []history.Subscriber{history.SubscriberFunc(func(e history.Event) {
				if e.Kind == history.FaultBegan || e.Kind == history.FaultEnded {
					events = append(events, e)
				}
			})}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(t.Context())
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("run: %v, want %q", err, tc.err)
			}
			if tc.name == "missed" && !errors.Is(err, missed) {
				t.Errorf("run: %v, does not wrap the fault's error", err)
			}
			if fm, ok := tc.backend.(*faultyMemory); ok && fm.active != 0 {
				t.Errorf("%d faults still in force after the run", fm.active)
			}
			for _, rep := range res.Modes {
				f := rep.FaultsOnServers
				if len(f) != 1 || f[0].Fault != string(spec.FaultPauseLeader) || f[0].NotPlayed == tc.played {
					t.Fatalf("%s: faults on servers %+v", rep.Mode, f)
				}
				if tc.played && (f[0].Target != "server 2" || f[0].Detail != "slowly" || f[0].Ended != "server 3 took over" || !f[0].FailedOver ||
					f[0].EndedMS < f[0].AtMS+300 || f[0].AtMS < 200) {
					t.Errorf("%s: %+v, want server 2 struck slowly at 200ms or after, for 300ms, and taken over", rep.Mode, f[0])
				}
				if !tc.played && (f[0].Target != "etcd leader" || !strings.Contains(f[0].Detail, "not applied")) {
					t.Errorf("%s: %+v, want the leader aimed at, and why it was not played", rep.Mode, f[0])
				}
			}
			// One fault, one instant: every mode records its beginning
			// and its end at the same time.
			at := map[history.Kind]time.Duration{}
			for _, e := range events {
				if t0, ok := at[e.Kind]; ok && t0 != e.At {
					t.Errorf("%s at %v in %s, at %v in another mode", e.Kind, e.At, e.Mode, t0)
				}
				at[e.Kind] = e.At
			}
		})
	}
}
