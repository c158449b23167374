package realtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime/etcdcluster"
	"github.com/leasefence/lab/spec"
)

// An embedded cluster of more than one member runs its members as
// processes behind proxies (package etcdcluster), so that the scenario's
// member faults can be played on it; a single member runs in this
// process.

// clusterSize is the embedded cluster's size for sc: the configuration's,
// else the scenario's, else 1.
func (c Config) clusterSize(sc spec.Scenario) int {
	switch {
	case c.EtcdMembers != 0:
		return c.EtcdMembers
	case sc.Etcd.Members != 0:
		return sc.Etcd.Members
	}
	return 1
}

// checkMembers reports why c cannot play sc's cluster size and member
// faults, or nil.
func (c Config) checkMembers(sc spec.Scenario) error {
	bad := func(setting, format string, args ...any) error {
		return &ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	if sc.Etcd.Members == 0 && len(sc.Etcd.Faults) == 0 {
		return nil
	}
	if c.Backend != BackendEtcd {
		return bad("scenario", "it sets an etcd cluster (etcd.members, etcd.faults), which needs backend etcd")
	}
	if len(c.EtcdEndpoints) > 0 {
		return bad("scenario", "it sets an etcd cluster (etcd.members, etcd.faults), which only an embedded etcd plays: drop --etcd-endpoints")
	}
	n := c.clusterSize(sc)
	if c.EtcdMembers != 0 && sc.Etcd.Members != 0 && c.EtcdMembers != sc.Etcd.Members {
		return bad("etcd-members", "the scenario asks for %d members (etcd.members), got %d", sc.Etcd.Members, c.EtcdMembers)
	}
	if len(sc.Etcd.Faults) > 0 && n < spec.MinFaultMembers {
		return bad("etcd-members", "member faults need at least %d members, got %d", spec.MinFaultMembers, n)
	}
	for i, f := range sc.Etcd.Faults {
		if f.Member > n {
			return bad("scenario", "etcd.faults[%d] names member %d of a cluster of %d", i, f.Member, n)
		}
	}
	return nil
}

// processClient is a client of member processes: gRPC keepalives find a
// paused member's connection dead within a couple of seconds, so that
// calls go to the others (the members allow pings that often).
func processClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
}

// Members is the embedded cluster when its members are processes (nil
// otherwise): tests and the runner's member faults reach it.
func (e *Etcd) Members() *etcdcluster.Cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.procs
}

// MemberFaultRecord is a member fault the run played (Intervention says
// what, to which member, when and for how long), or tried to: Error says
// why it could not.
type MemberFaultRecord struct {
	history.Intervention
	Error string `json:"error,omitempty"`
}

// scheduleMembers starts the scenario's member faults, each on its own
// goroutine of wg: it begins at its instant, unless the run is over by
// then, and ends after its duration, or when the run does (so that the
// resources' records can be read back).
func (r *Runner) scheduleMembers(ctx context.Context, wg *sync.WaitGroup) {
	e, ok := r.backend.(*Etcd)
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
			undo := r.memberFault(ctx, e.Members(), f)
			sleep(ctx, f.Duration)
			undo()
		}()
	}
}

// memberFault applies f to the cluster and records it in every mode; it
// returns what ends it.
func (r *Runner) memberFault(ctx context.Context, cl *etcdcluster.Cluster, f spec.MemberFault) (undo func()) {
	iv := history.Intervention{Duration: f.Duration, Kind: history.PauseMember, Member: f.Member}
	undo = func() {}
	var err error
	if cl == nil {
		err = fmt.Errorf("the cluster's members are not processes")
	} else {
		leader, lerr := cl.Leader(ctx)
		if f.Member == 0 { // pause_leader, or partition_member of the leader
			iv.Member, err = leader+1, lerr
		}
		iv.Leader = lerr == nil && leader == iv.Member-1
		if err == nil {
			undo, err = applyMemberFault(cl, f, iv.Member-1)
		}
	}
	if f.Do == spec.PartitionMember {
		iv.Kind, iv.Value = history.PartitionMember, f.Delay.Seconds()
	}
	rec := MemberFaultRecord{Intervention: iv}
	if err != nil {
		rec.Error = "not applied: " + err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return undo
	}
	rec.At = r.now()
	r.members = append(r.members, rec)
	for _, w := range r.worlds {
		ivc := rec.Intervention
		r.emitLocked(w.mode, history.Event{Kind: history.Intervened, Agent: -1, Resource: -1, Other: -1, Intervention: &ivc, Detail: rec.Error})
	}
	return undo
}

// applyMemberFault begins f on member i and returns what ends it.
func applyMemberFault(cl *etcdcluster.Cluster, f spec.MemberFault, i int) (func(), error) {
	switch {
	case f.Do == spec.PartitionMember && f.Delay > 0:
		return func() { cl.Delay(i, 0) }, cl.Delay(i, f.Delay)
	case f.Do == spec.PartitionMember:
		return func() { cl.Heal(i) }, cl.Partition(i)
	default:
		return func() { cl.Resume(i) }, cl.Pause(i)
	}
}
