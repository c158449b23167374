package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
)

// grantingLock grants every Acquire: two holders at once.
type grantingLock struct{}

func (grantingLock) Acquire(_ context.Context, _, _ string, ttl time.Duration) (realtime.Lease, error) {
	return grantingLease{time.Now().Add(ttl)}, nil
}

type grantingLease struct{ deadline time.Time }

func (l grantingLease) Deadline() time.Time         { return l.deadline }
func (grantingLease) Fence() (uint64, bool)         { return 0, false }
func (grantingLease) Renew(context.Context) error   { return nil }
func (grantingLease) Release(context.Context) error { return nil }

// grantingApp is the lab whose real-time runs put grantingLock in the
// lab's own modes, writing to out and errb.
func grantingApp() (out, errb *strings.Builder, a *app) {
	out, errb = &strings.Builder{}, &strings.Builder{}
	a = &app{stdout: out, stderr: errb, onSetup: func(s *realtime.Setup) {
		s.Backend = &realtime.Contender{Info: history.Contender{Library: "grants every acquire", Discipline: history.DisciplineNaive,
			Generations: realtime.GenerationsObserved}, New: func(context.Context, history.Mode) (realtime.Lock, error) { return grantingLock{}, nil }}
	}}
	return out, errb, a
}

// A lock that breaks exclusion, run with --stop-at-first, fails (exit 1)
// at its first counterexample, within seconds of a scenario of 7s (the
// battery's first, and the battery with it) or 60s (a run of overlap):
// the report says it covers what ran until then and whose lock finding
// broke, and standard error says it stopped.
func TestStopsAtFirstCounterexample(t *testing.T) {
	t.Parallel()
	const before = "before the first counterexample of a lock's own safety (--stop-at-first: naive's lock finding broke)."
	for _, tc := range []struct {
		args           []string
		stdout, stderr []string
		within         time.Duration
	}{
		{[]string{"run", "battery", "--backend", "memory", "--mode", "naive", "--stop-at-first"},
			[]string{"(of 7.000s)", "verdict:  BROKEN: the lock broke its own safety"},
			[]string{"stopped at contention, the first scenario where a lock broke"}, 6 * time.Second},
		{[]string{"run", "overlap", "--backend", "memory", "--mode", "naive", "--stop-at-first"},
			[]string{"(of 60.000s)"}, []string{"lab run: stopped at ", "the report covers what ran " + before}, 20 * time.Second},
	} {
		t.Run(tc.args[1], func(t *testing.T) {
			t.Parallel()
			out, errb, a := grantingApp()
			began := time.Now()
			code := a.main(t.Context(), tc.args)
			took := time.Since(began)
			t.Logf("exit %d after %s\n%s", code, took, errb.String())
			ok := code == exitFailed && strings.Contains(out.String(), "INTERRUPTED at ") && !strings.Contains(out.String(), "INTERRUPTED at 0ms") &&
				strings.Contains(out.String(), "cover only what ran "+before)
			for _, want := range tc.stdout {
				ok = ok && strings.Contains(out.String(), want)
			}
			for _, want := range tc.stderr {
				ok = ok && strings.Contains(errb.String(), want)
			}
			if !ok {
				t.Fatalf("%q: exit %d, stdout:\n%s\nstderr:\n%s", tc.args, code, out.String(), errb.String())
			}
			if took > tc.within {
				t.Errorf("%q took %s: it did not stop at the first counterexample", tc.args, took)
			}
		})
	}
}
