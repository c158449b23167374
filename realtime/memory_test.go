package realtime_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
)

// The in-memory gate raises its floor before the admitted write runs, and
// refuses a stale token at once, without waiting for that write: the
// resource answers such a refusal, and a reading of the floor, only once
// its record holds the landing of the floor they name. Answered before,
// the refusal is recorded before the admission that explains it, and the
// checker finds it unexplained (history's
// testdata/refused_before_its_floor_landed.jsonl: a run of restart-lost).
func TestMemoryAnswersAfterItsFloorLanded(t *testing.T) {
	entered, resume := make(chan struct{}), make(chan struct{})
	var stamps atomic.Int32
	// The first landing's stamp waits: the gate has raised its floor to
	// agent-1@2, and its write has not yet been recorded.
	now := func() time.Duration {
		if stamps.Add(1) == 1 {
			close(entered)
			<-resume
		}
		return time.Duration(stamps.Load())
	}
	res := realtime.NewMemoryResource("res-1", now)
	token := func(holder string, f leasefence.Fence) leasefence.Token {
		return leasefence.Token{Resource: "res-1", Holder: holder, Fence: f}
	}
	admitted := make(chan error, 1)
	go func() { admitted <- res.Commit(t.Context(), token("agent-1", 2), 1) }()
	<-entered

	type answer struct {
		what  string
		floor leasefence.Token
		err   error
	}
	answers := make(chan answer, 2)
	go func() {
		answers <- answer{"commit of agent-2@1", leasefence.Token{}, res.Commit(t.Context(), token("agent-2", 1), 2)}
	}()
	go func() {
		floor, err := res.Floor(t.Context())
		answers <- answer{"floor", floor, err}
	}()
	// A resource that answers without its record answers both at once,
	// while agent-1's landing waits for its stamp, unrecorded. This one
	// cannot answer until the stamp is let go.
	var got []answer
	wait := time.After(200 * time.Millisecond)
	for waiting := true; waiting && len(got) < 2; {
		select {
		case a := <-answers:
			t.Errorf("the %s answered (%v, %v) before the landing of the floor agent-1@2 was recorded", a.what, a.floor, a.err)
			got = append(got, a)
		case <-wait:
			waiting = false
		}
	}
	close(resume)
	if err := <-admitted; err != nil {
		t.Fatalf("agent-1@2: %v", err)
	}
	if record, err := res.Landings(t.Context()); err != nil || len(record) != 1 || record[0].ID != 1 {
		t.Fatalf("record %v, %v; want agent-1@2's write alone", record, err)
	}
	for len(got) < 2 {
		got = append(got, <-answers)
	}
	for _, a := range got {
		var stale *leasefence.StaleFenceError
		switch {
		case a.what == "floor" && (a.err != nil || a.floor != token("agent-1", 2)):
			t.Errorf("floor %v, %v; want agent-1@2", a.floor, a.err)
		case a.what != "floor" && (!errors.As(a.err, &stale) || stale.FloorHolder != "agent-1" || stale.FloorFence != 2):
			t.Errorf("the %s: %v, want refused by agent-1@2", a.what, a.err)
		}
	}
}
