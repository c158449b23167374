package agent_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/agent"
	"github.com/leasefence/lab/history"
)

type recorder []string

func (r *recorder) Emit(e *history.Event) { *r = append(*r, "emit "+e.Kind.String()) }
func (r *recorder) Send(q *agent.Request) { *r = append(*r, fmt.Sprintf("send %v", q.Kind)) }
func (r *recorder) Arm(t agent.Timer, gen uint32, at time.Duration) {
	*r = append(*r, fmt.Sprintf("arm %d gen %d at %v", t, gen, at))
}
func (r *recorder) Failed(f *agent.Failure) { *r = append(*r, "failed "+f.Op) }

// Dispatch hands every output to its handler in order, and the write
// back; a failure stops the batch.
func TestDispatch(t *testing.T) {
	ev := history.Event{Kind: history.CheckPassed}
	req := agent.Request{Kind: history.RequestRenew}
	w := agent.WriteOp{Resource: 2}
	var r recorder
	write, ok := agent.Dispatch([]agent.Output{
		{Kind: agent.Emit, Event: &ev},
		{Kind: agent.Send, Request: &req},
		{Kind: agent.Arm, Timer: agent.TimerRenew, Gen: 3, At: time.Second},
		{Kind: agent.Write, Write: &w},
	}, &r)
	want := recorder{"emit " + history.CheckPassed.String(), fmt.Sprintf("send %v", history.RequestRenew), fmt.Sprintf("arm %d gen 3 at 1s", agent.TimerRenew)}
	if !ok || write != &w || !slices.Equal(r, want) {
		t.Errorf("Dispatch = %v, %v; handled %q, want the write, true, %q", write, ok, r, want)
	}

	r = nil
	f := agent.Failure{Op: "Acquire", Err: errors.New("boom")}
	write, ok = agent.Dispatch([]agent.Output{{Kind: agent.Failed, Failure: &f}, {Kind: agent.Emit, Event: &ev}}, &r)
	if ok || write != nil || !slices.Equal(r, recorder{"failed Acquire"}) {
		t.Errorf("after a failure: %v, %v, handled %q; want nothing more", write, ok, r)
	}
	if write, ok := agent.Dispatch(nil, &r); !ok || write != nil {
		t.Errorf("an empty batch: %v, %v", write, ok)
	}
}
