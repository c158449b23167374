package realtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// faultEnd bounds the end of a fault of the faults list: undoing it (a
// member resumed, an old primary restarted and resynced as a replica).
const faultEnd = 30 * time.Second

// TimedFaults plays a scenario's faults list (spec.TimedFault) on a
// backend, every kind alike: each entry on a goroutine of its own begins
// at its instant (FaultPlayer.BeginFault), unless the run is over by then,
// and ends after its duration or when the run does (ActiveFault.End), so
// that the resources' records can be read back. Each is recorded by its
// fault_began and fault_ended alone: what it struck, and what it did. The
// in-process runner plays them, and so does a runner of agents as
// processes.
type TimedFaults struct {
	player  FaultPlayer // nil: the backend plays none
	backend string
	now     func() time.Duration
	record  func(history.Event)

	mu   sync.Mutex
	errs []error
}

// PlayFaults starts faults on backend b, each on a goroutine of wg; now
// is the run's instant, record records an event in every mode, now (and
// drops it once the run is over). Err says, once wg is done, what failed
// the run.
func PlayFaults(ctx context.Context, wg *sync.WaitGroup, b Backend, faults []spec.TimedFault, now func() time.Duration,
	record func(history.Event)) *TimedFaults {
	p, _ := b.(FaultPlayer)
	t := &TimedFaults{player: p, backend: b.Name(), now: now, record: record}
	for i, f := range faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep(ctx, f.At-now()) != nil {
				return
			}
			t.play(ctx, i, f)
		}()
	}
	return t
}

// play plays faults[i], f, now, and records its beginning and its end.
func (t *TimedFaults) play(ctx context.Context, i int, f spec.TimedFault) {
	began := f.Do.Began(-1, f.Aim(), f.Duration)
	active, err := t.begin(ctx, f)
	if err != nil {
		if ctx.Err() != nil {
			return // the run ended while it began: not asked for any longer
		}
		began.Outcome, began.Detail = history.OutcomeNotPlayed, "not applied: "+err.Error()
		t.record(began)
		t.fail(fmt.Errorf("realtime: faults[%d]: %s at %v: not applied: %w", i, f.Do, history.FormatDuration(f.At), err))
		return
	}
	began.Target, began.Detail = active.Began()
	t.record(began)
	sleep(ctx, f.Duration)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), faultEnd)
	defer cancel()
	out := active.End(ectx)
	ended := began.Ended()
	ended.Detail, ended.Outcome = out.Detail, out.Outcome
	t.record(ended)
	if out.Err != nil {
		t.fail(fmt.Errorf("realtime: faults[%d]: %s at %v: %w", i, f.Do, history.FormatDuration(f.At), out.Err))
	}
}

func (t *TimedFaults) begin(ctx context.Context, f spec.TimedFault) (ActiveFault, error) {
	if t.player == nil {
		return nil, fmt.Errorf("backend %s plays no fault of the faults list", t.backend)
	}
	return t.player.BeginFault(ctx, f)
}

func (t *TimedFaults) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, err)
}

// Err is the run's error for the faults that could not begin or did not
// do what the scenario asked of them (FaultOutcome.Err), or nil.
func (t *TimedFaults) Err() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return errors.Join(t.errs...)
}
