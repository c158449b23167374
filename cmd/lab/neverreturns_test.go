package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
)

// stuckBackend is a backend whose coordinators' Acquire blocks until stop
// is closed, whatever its context says.
type stuckBackend struct {
	realtime.Backend
	stop chan struct{}
}

func (b stuckBackend) Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	svc, err := b.Backend.Open(ctx, mode, clock, ttl)
	if err != nil {
		return nil, err
	}
	return func() leasefence.Service { return stuckService{svc(), b.stop} }, nil
}

type stuckService struct {
	leasefence.Service
	stop chan struct{}
}

func (s stuckService) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	<-s.stop
	return s.Service.Acquire(ctx, req)
}

// lab run of a lock whose Acquire never returns ends a grace after its
// duration (realtime.DefaultGrace), reports what ran, keeps the history
// with each call that never returned as the library's error, names the
// agent, the call and the scenario, and exits 1.
func TestRunLockThatNeverReturns(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	path := filepath.Join(t.TempDir(), "run.jsonl")
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, onSetup: func(s *realtime.Setup) { s.Backend = stuckBackend{s.Backend, stop} }}
	began := time.Now()
	code := a.main(t.Context(), []string{"run", "overlap", "--backend", "memory", "--duration", "1s", "--events", path, "--json"})
	took := time.Since(began)
	t.Logf("exit %d after %s\n%s", code, took, errb.String())
	if took > realtime.DefaultGrace+20*time.Second {
		t.Errorf("lab run took %s for a 1s run", took)
	}
	if code != exitFailed || !strings.Contains(errb.String(), "lab run: scenario overlap: agent-") ||
		!strings.Contains(errb.String(), "'s Acquire of res-1 (mode ") || !strings.Contains(errb.String(), "never returned") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit %d naming the scenario, the agent and the call", code, errb.String(), exitFailed)
	}
	if !strings.Contains(out.String(), `"scenario": "overlap"`) {
		t.Errorf("no report of what ran:\n%s", out.String())
	}
	h, events, err := history.ReadFile(path)
	if err != nil {
		t.Fatalf("the history: %v", err)
	}
	n := 0
	for _, e := range events {
		if e.Kind == history.LibraryError && strings.Contains(e.Detail, "Acquire of res-1 never returned") {
			n++
		}
	}
	if n == 0 || !history.Check(h, events).Failed() {
		t.Errorf("the history holds %d calls that never returned, and lab check passes it: %v", n, history.Check(h, events).Failed())
	}
}

// closeWaitsLock is a lock whose Acquire never returns until stop is
// closed, whatever its context says, and whose Close waits as long: a
// library whose Close waits for its calls under way.
type closeWaitsLock struct{ stop chan struct{} }

func (l closeWaitsLock) Acquire(context.Context, string, string, time.Duration) (realtime.Lease, error) {
	<-l.stop
	return nil, realtime.ErrHeld
}

func (l closeWaitsLock) Close() error {
	<-l.stop
	return nil
}

// After a call that never returned, lab run closes the locks and servers
// for a bounded time: a lock whose Close waits for that call does not
// hold the command up. It reports what ran, says the close did not finish
// and exits 1, within the run, the grace and the limit.
func TestRunExitsWhenALocksCloseWaits(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	lock := &realtime.Contender{Info: history.Contender{Name: history.Naive, Discipline: history.DisciplineNaive, Generations: realtime.GenerationsObserved},
		New: func(context.Context, history.Mode) (realtime.Lock, error) { return closeWaitsLock{stop}, nil }}
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, closeLimit: 500 * time.Millisecond, onSetup: func(s *realtime.Setup) { s.Backend = lock }}
	type exit struct {
		code int
		took time.Duration
	}
	done := make(chan exit, 1)
	go func() {
		began := time.Now()
		code := a.main(t.Context(), []string{"run", "overlap", "--backend", "memory", "--contenders", "naive", "--duration", "1s", "--json"})
		done <- exit{code, time.Since(began)}
	}()
	var e exit
	select {
	case e = <-done:
	case <-time.After(realtime.DefaultGrace + 30*time.Second):
		t.Fatalf("lab run had not exited %s after a 1s run: it waits for the lock's Close", realtime.DefaultGrace+30*time.Second)
	}
	t.Logf("exit %d after %s\n%s", e.code, e.took, errb.String())
	if e.code != exitFailed || !strings.Contains(errb.String(), "never returned") ||
		!strings.Contains(errb.String(), "lab run: --backend memory: closing the locks and servers did not finish 500ms after a call that never returned") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit %d, the call that never returned and the close that did not finish", e.code, errb.String(), exitFailed)
	}
	if !strings.Contains(out.String(), `"scenario": "overlap"`) {
		t.Errorf("no report of what ran:\n%s", out.String())
	}
}
