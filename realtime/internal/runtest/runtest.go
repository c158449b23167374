// Package runtest holds what the tests of the real-time runner and of its
// adapters share: a scenario cut short, a run with its history file, and
// the checks every real run must pass.
package runtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// Short returns builtin name cut to at most d of scenario time and
// stretched by k, so that a real-time run takes about d*k of wall time.
func Short(t *testing.T, name string, d time.Duration, k float64) spec.Scenario {
	t.Helper()
	sc, ok := spec.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %q", name)
	}
	sc.Duration = min(sc.Duration, d)
	return realtime.Scale(sc, k)
}

// recorder keeps a run's history as the file would hold it.
type recorder struct {
	buf bytes.Buffer
	enc *history.Encoder
}

func (r *recorder) Event(e history.Event) { r.enc.Event(e) }

// RunRecorded runs sc on setup-less options and returns the result and its
// history file, which a test that fails keeps as <scenario>-<seed>.jsonl in
// its artifact directory (go test -artifacts; the failure's log names it).
func RunRecorded(t *testing.T, sc spec.Scenario, opts realtime.Options) (*realtime.Result, []byte) {
	t.Helper()
	rec := &recorder{}
	opts.Subscribers = append(opts.Subscribers, rec)
	r, err := realtime.New(sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rec.enc, err = history.NewEncoder(&rec.buf, r.Header()); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.enc.Flush(); err != nil {
		t.Fatal(err)
	}
	file := rec.buf.Bytes()
	t.Cleanup(func() { keepOnFailure(t, fmt.Sprintf("%s-%d.jsonl", sc.Name, sc.Seed), file) })
	return res, file
}

// keepOnFailure writes the history of a failed test's run where go test
// -artifacts keeps it, so that a failure seen once can be judged again.
func keepOnFailure(t *testing.T, name string, file []byte) {
	if !t.Failed() {
		return
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Errorf("keeping the failed run's history: %v", err)
		return
	}
	t.Logf("the failed run's history: %s", path)
}

// CheckRoundTrip checks that the history file gives the checker exactly
// the run's own verdict.
func CheckRoundTrip(t *testing.T, res *realtime.Result, file []byte) {
	t.Helper()
	h, events, err := history.Decode(bytes.NewReader(file), "run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	again := history.Check(h, events)
	got, _ := json.Marshal(again)
	want, _ := json.Marshal(res.Result)
	if !bytes.Equal(got, want) {
		t.Errorf("the history checked again differs from the run's report:\n got %s\nwant %s", got, want)
	}
	if h.Backend != res.Backend {
		t.Errorf("header backend %q, want %q", h.Backend, res.Backend)
	}
}

// AssertInvariants fails on any violation of the fenced mode's promises.
func AssertInvariants(t *testing.T, res *realtime.Result) {
	t.Helper()
	if v := res.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
		for m, rep := range res.Modes {
			for _, cx := range rep.Counterexamples {
				t.Logf("%s: %+v", m, cx)
			}
		}
	}
	if f, ok := res.Modes[history.Fenced]; ok {
		if f.StaleWritesLanded != 0 || f.UnexplainedRefusals != 0 {
			t.Errorf("fenced: %d stale writes landed, %d unexplained refusals", f.StaleWritesLanded, f.UnexplainedRefusals)
		}
	}
}

// EtcdSetup opens an embedded etcd of members (0: the scenario's, or 1),
// and its gates, under a directory of the test, closed at its end. The
// test binary must link the etcd adapter (realtime/etcdbackend).
func EtcdSetup(t *testing.T, members int, sc spec.Scenario) *realtime.Setup {
	t.Helper()
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Etcd, EtcdMembers: members, TempDir: t.TempDir()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// LockDelayScript is one lease that expires unreleased under a lock-delay
// of delay: agent-1 takes res-1's 1s lease at 0 and never renews it, so it
// expires at 1s; agent-2 asks for it at 2s, inside the delay, and again at
// retry, after it; the run ends 500ms later. With a delay of 3s and retry
// at 5s, every instant is a second from the bounds it is judged by.
func LockDelayScript(delay, retry time.Duration) spec.Scenario {
	return spec.Scenario{Name: "lock-delay-script", Seed: 1, Duration: retry + 500*time.Millisecond, Agents: 2, Resources: 1,
		TTL: time.Second, LockDelay: delay, Agent: spec.Behaviour{WritesPerLease: 1},
		Script: []spec.Action{
			{At: 0, Agent: "agent-1", Do: spec.ActAcquire},
			{At: 2 * time.Second, Agent: "agent-2", Do: spec.ActAcquire},
			{At: retry, Agent: "agent-2", Do: spec.ActAcquire},
		}}
}

// CheckLockDelayed fails unless every mode of a run of LockDelayScript
// played the lock-delay, as its history file records it: agent-2's first
// ask refused for "lock-delay", its second granted, and the resource idle
// (idle_while_waiting_ms) for idle, give or take a second: the time
// between them.
func CheckLockDelayed(t *testing.T, res *realtime.Result, file []byte, idle time.Duration) {
	t.Helper()
	h, events, err := history.Decode(bytes.NewReader(file), "run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h.Modes {
		var delayed, granted int
		for _, e := range events {
			switch {
			case e.Mode != m || e.Agent != 1:
			case e.Kind == history.Denied && e.Reason == leasefence.ReasonLockDelay:
				delayed++
			case e.Kind == history.Granted:
				granted++
			}
		}
		got := time.Duration(res.Modes[m].IdleWhileWaitingMS) * time.Millisecond
		if delayed != 1 || granted != 1 || got < idle-time.Second || got > idle+time.Second {
			t.Errorf("%s: agent-2 refused for lock-delay %d times and granted %d times, idle %v; want once, once, and about %v",
				m, delayed, granted, got, idle)
		}
	}
}
