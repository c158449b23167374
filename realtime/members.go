package realtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// MemberFaultRecord is a member fault the run played (what, to which
// member, when and for how long), or tried to: Error says why it could
// not.
type MemberFaultRecord struct {
	At       time.Duration `json:"at"`
	Kind     spec.Fault    `json:"kind"`
	Member   int           `json:"member"` // from 1
	Leader   bool          `json:"leader,omitempty"`
	Duration time.Duration `json:"duration"`
	Delay    time.Duration `json:"delay,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// scheduleMembers starts the scenario's member faults, each on its own
// goroutine of wg: it begins at its instant, unless the run is over by
// then, and ends after its duration, or when the run does (so that the
// resources' records can be read back).
func (r *Runner) scheduleMembers(ctx context.Context, wg *sync.WaitGroup) {
	e, ok := r.backend.(MemberBackend)
	if !ok || len(r.sc.Etcd.Faults) == 0 {
		return
	}
	for _, f := range r.sc.Etcd.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep(ctx, f.At-r.now()) != nil {
				return
			}
			rec, undo := r.memberFault(ctx, e.FaultMembers(), f)
			sleep(ctx, f.Duration)
			undo()
			if rec.Error == "" {
				r.recordFault(rec.event().Ended())
			}
		}()
	}
}

// memberFault applies f to the cluster and records it in every mode; it
// returns what it recorded and what ends it.
func (r *Runner) memberFault(ctx context.Context, cl Members, f spec.MemberFault) (MemberFaultRecord, func()) {
	rec := MemberFaultRecord{Kind: f.Do, Member: f.Member, Duration: f.Duration, Delay: f.Delay}
	undo := func() {}
	var err error
	if cl == nil {
		err = fmt.Errorf("the cluster's members are not processes")
	} else {
		leader, lerr := cl.Leader(ctx)
		if f.Member == 0 { // pause_leader, or partition_member of the leader
			rec.Member, err = leader+1, lerr
		}
		rec.Leader = lerr == nil && leader == rec.Member-1
		if err == nil {
			undo, err = applyMemberFault(cl, f, rec.Member-1)
		}
	}
	if err != nil {
		rec.Error = "not applied: " + err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return rec, undo
	}
	rec.At = r.now()
	r.members = append(r.members, rec)
	r.recordFaultLocked(rec.event())
	return rec, undo
}

// event is the fault_began of the member fault rec.
func (rec MemberFaultRecord) event() history.Event {
	e := rec.Kind.Began(-1, spec.MemberTarget(rec.Member, rec.Leader), rec.Duration)
	if rec.Delay > 0 {
		e.Detail = "traffic delayed " + history.FormatDuration(rec.Delay)
	}
	if rec.Error != "" {
		e.Outcome, e.Detail = history.OutcomeNotPlayed, rec.Error
	}
	return e
}

// applyMemberFault begins f on member i and returns what ends it.
func applyMemberFault(cl Members, f spec.MemberFault, i int) (func(), error) {
	switch {
	case f.Do == spec.FaultPartitionMember && f.Delay > 0:
		return func() { cl.Delay(i, 0) }, cl.Delay(i, f.Delay)
	case f.Do == spec.FaultPartitionMember:
		return func() { cl.Heal(i) }, cl.Partition(i)
	default:
		return func() { cl.Resume(i) }, cl.Pause(i)
	}
}
