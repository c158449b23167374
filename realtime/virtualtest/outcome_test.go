package virtualtest_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/virtualtest"
	"github.com/leasefence/lab/spec"
)

// The history file an outcome writes holds every event of the run, as
// lab check reads it.
func TestHistoryHoldsEveryEvent(t *testing.T) {
	o := virtualtest.Run(t, builtin(t, "overlap"), virtualtest.Memory(), virtualtest.Config{})
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	data, err := o.History()
	if err != nil {
		t.Fatal(err)
	}
	h, events, err := history.Decode(bytes.NewReader(data), "overlap.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(o.Events) || h.Seed != o.Header.Seed {
		t.Errorf("the file holds %d events of seed %d, the run %d of seed %d", len(events), h.Seed, len(o.Events), o.Header.Seed)
	}
}

// A lock that leaves a goroutine of its own blocked for good (a client's
// pool, a refresher) once the run is over does not end the test binary:
// the bubble calls it a deadlock, which Run takes for what it is, and the
// run's outcome stands.
func TestGoroutineLeftBlocked(t *testing.T) {
	lock := &sleepyLock{wait: time.Millisecond}
	tg := virtualtest.Target{Name: "leaves", Open: func(*testing.T, spec.Scenario) (realtime.Options, error) {
		go func() { <-make(chan struct{}) }() // made in the bubble: blocked durably, for good
		return alone("leaves", lock, false).Open(nil, spec.Scenario{})
	}}
	began := time.Now()
	o := virtualtest.Run(t, builtin(t, "overlap"), tg, virtualtest.Config{})
	if o.Err != nil || o.Result == nil {
		t.Fatalf("outcome %v, %v: want the run's", o.Err, o.Result)
	}
	if took := time.Since(began); took > virtualtest.DefaultWatchdog {
		t.Errorf("Run took %s: it waited for the bubble past its end", took)
	}
}
