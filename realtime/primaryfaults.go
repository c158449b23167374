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

// PrimaryFaulter is a backend whose primary the scenario's redis.faults
// strike: the Redis backend on its sentinel topology.
type PrimaryFaulter interface {
	// BeginPrimaryFault strikes the primary of the moment with kind (one
	// of spec.RedisFaults), and waits for the failover in the background.
	BeginPrimaryFault(ctx context.Context, kind spec.Fault) (PrimaryFault, error)
}

// PrimaryFault is one fault being played on a primary.
type PrimaryFault interface {
	// Victim names the server struck: the primary when it began.
	Victim() string
	// End undoes the fault and brings the old primary back as a replica
	// of the promoted one; it says what the fault did.
	End(ctx context.Context) PrimaryFaultOutcome
}

// PrimaryFaultOutcome is what one fault of the primary did: the server it
// struck, the server promoted in its place and how long after the fault
// began, and how the old primary came back.
type PrimaryFaultOutcome struct {
	Victim   string        `json:"victim"`
	Promoted string        `json:"promoted,omitempty"` // "" if none was
	After    time.Duration `json:"after,omitempty"`    // from the fault's beginning to the promotion
	// Err: no failover (it wraps ErrNoFailover), which fails the run, or
	// the old primary not back as a replica, which the record says.
	Err error `json:"-"`
}

// ErrNoFailover: a fault of the primary ended, or the run did, before a
// replica was promoted; the run did not put the failover to the test, and
// fails.
var ErrNoFailover = errors.New("no replica was promoted during the fault")

// PrimaryFaultRecord is a fault of the primary the run played, or tried
// to: Error says why it did not fail over, or why it could not begin.
type PrimaryFaultRecord struct {
	At       time.Duration `json:"at"`
	Kind     spec.Fault    `json:"kind"`
	Duration time.Duration `json:"duration"`
	PrimaryFaultOutcome
	Error string `json:"error,omitempty"`
}

// String says what the fault did in one line: the history's fault_ended
// detail, the dashboard's note.
func (rec PrimaryFaultRecord) String() string {
	s := fmt.Sprintf("%s of %s", rec.Kind, rec.Victim)
	if rec.Promoted != "" {
		s += fmt.Sprintf(": %s promoted %v after, %s back as its replica", rec.Promoted, rec.After.Round(time.Millisecond), rec.Victim)
	}
	if rec.Error != "" {
		s += ": " + rec.Error
	}
	return s
}

// primaryFaultEnd bounds the end of a fault: resuming, restarting or
// healing the old primary and its resync as a replica.
const primaryFaultEnd = 30 * time.Second

// schedulePrimaryFaults starts the scenario's faults of the primary, one
// after another on one goroutine of wg: each begins at its instant, unless
// the run is over by then, and ends after its duration, or when the run
// does.
func (r *Runner) schedulePrimaryFaults(ctx context.Context, wg *sync.WaitGroup) {
	pf, ok := r.backend.(PrimaryFaulter)
	if !ok || len(r.sc.Redis.Faults) == 0 {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, f := range r.sc.Redis.Faults {
			if sleep(ctx, f.At-r.now()) != nil {
				return
			}
			r.primaryFault(ctx, pf, f)
		}
	}()
}

// primaryFault plays f and records its beginning and its end.
func (r *Runner) primaryFault(ctx context.Context, pf PrimaryFaulter, f spec.RedisFault) {
	rec := PrimaryFaultRecord{At: r.now(), Kind: f.Do, Duration: f.Duration}
	fault, err := pf.BeginPrimaryFault(ctx, f.Do)
	if err != nil {
		rec.Error = "not applied: " + err.Error()
		r.recordPrimaryFault(rec, true)
		return
	}
	rec.Victim = fault.Victim()
	r.recordPrimaryFault(rec, true)
	sleep(ctx, f.Duration)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), primaryFaultEnd)
	defer cancel()
	rec.PrimaryFaultOutcome = fault.End(ectx)
	if rec.Err != nil {
		rec.Error = rec.Err.Error()
	}
	r.recordPrimaryFault(rec, false)
}

// primaryFaultErr is the run's error for the faults of the primary that
// could not begin or saw no failover, or nil. An old primary that failed
// over but did not come back as a replica in time fails nothing the run
// judged: its fault_ended says so.
func (r *Runner) primaryFaultErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, rec := range r.primaries {
		switch {
		case errors.Is(rec.Err, ErrNoFailover):
			errs = append(errs, fmt.Errorf("realtime: redis.faults: %s at %v: %w", rec.Kind, rec.At.Round(time.Millisecond), rec.Err))
		case rec.Err == nil && rec.Error != "": // it could not begin
			errs = append(errs, fmt.Errorf("realtime: redis.faults: %s at %v: %s", rec.Kind, rec.At.Round(time.Millisecond), rec.Error))
		}
	}
	return errors.Join(errs...)
}

// recordPrimaryFault records rec in every mode, now: its fault_began
// (began), or its fault_ended, whose detail says what the fault did. A
// fault that could not begin is a fault_began not played.
func (r *Runner) recordPrimaryFault(rec PrimaryFaultRecord, began bool) {
	e := rec.Kind.Began(-1, spec.RedisTarget(rec.Victim), rec.Duration)
	switch {
	case began && rec.Error != "":
		e.Target = spec.RedisTarget("(none)")
		e.Outcome, e.Detail = history.OutcomeNotPlayed, rec.Error
	case !began:
		e = e.Ended()
		e.Detail = rec.String()
		if rec.Promoted != "" {
			// The checker reads it: fences minted since the fault began
			// may reissue some the old primary minted and no replica saw.
			e.Outcome = history.OutcomeFailedOver
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if began {
		r.primaries = append(r.primaries, rec)
	} else if n := len(r.primaries); n > 0 {
		r.primaries[n-1] = rec
	}
	if r.stopped {
		return
	}
	r.recordFaultLocked(e)
}
