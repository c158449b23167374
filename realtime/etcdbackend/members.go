package etcdbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/etcdcluster"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// An embedded cluster of more than one member runs its members as
// processes behind proxies (package etcdcluster), so that the scenario's
// member faults can be played on it; a single member runs in this
// process.

// clusterSize is the embedded cluster's size for sc: the configuration's,
// else the scenario's, else 1.
func clusterSize(c realtime.Config, sc spec.Scenario) int {
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
func checkMembers(c realtime.Config, sc spec.Scenario) error {
	bad := func(setting, format string, args ...any) error {
		return &realtime.ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	faults := memberFaults(sc)
	if sc.Etcd.Members == 0 && len(faults) == 0 {
		return nil
	}
	if c.Backend != registry.Etcd {
		return bad("scenario", "it sets an etcd cluster (etcd.members, member faults), which needs backend etcd")
	}
	if len(c.EtcdEndpoints) > 0 {
		return bad("scenario", "it sets an etcd cluster (etcd.members, member faults), which only an embedded etcd plays: drop --etcd-endpoints")
	}
	n := clusterSize(c, sc)
	if c.EtcdMembers != 0 && sc.Etcd.Members != 0 && c.EtcdMembers != sc.Etcd.Members {
		return bad("etcd-members", "the scenario asks for %d members (etcd.members), got %d", sc.Etcd.Members, c.EtcdMembers)
	}
	if len(faults) > 0 && n < spec.MinFaultMembers {
		return bad("etcd-members", "member faults need at least %d members, got %d", spec.MinFaultMembers, n)
	}
	for i, f := range sc.Faults {
		if f.Member > n {
			return bad("scenario", "faults[%d] names member %d of a cluster of %d", i, f.Member, n)
		}
	}
	return nil
}

// memberFaults are sc's faults of etcd members.
func memberFaults(sc spec.Scenario) []spec.TimedFault {
	return slices.DeleteFunc(slices.Clone(sc.Faults), func(f spec.TimedFault) bool { return !slices.Contains(spec.MemberFaults, f.Do) })
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

// BeginFault implements realtime.FaultPlayer: it plays a fault of an etcd
// member (spec.MemberFaults) on the member processes.
func (e *Etcd) BeginFault(ctx context.Context, f spec.TimedFault) (realtime.ActiveFault, error) {
	cl := e.Members()
	if cl == nil {
		return nil, errors.New("the cluster's members are not processes")
	}
	leader, lerr := cl.Leader(ctx)
	mf := &memberFault{member: f.Member, delay: f.Delay}
	if f.Member == 0 { // pause_leader, or partition_member of the leader
		if lerr != nil {
			return nil, lerr
		}
		mf.member = leader + 1
	}
	mf.leader = lerr == nil && leader == mf.member-1
	i := mf.member - 1
	var err error
	switch f.Do {
	case spec.FaultPartitionMember:
		if f.Delay > 0 {
			mf.undo, err = func() { cl.Delay(i, 0) }, cl.Delay(i, f.Delay)
		} else {
			mf.undo, err = func() { cl.Heal(i) }, cl.Partition(i)
		}
	case spec.FaultPauseMember, spec.FaultPauseLeader:
		mf.undo, err = func() { cl.Resume(i) }, cl.Pause(i)
	default:
		err = fmt.Errorf("etcd plays no fault %q", f.Do)
	}
	if err != nil {
		return nil, err
	}
	return mf, nil
}

// memberFault is a fault of an etcd member in force.
type memberFault struct {
	member int // from 1
	leader bool
	delay  time.Duration
	undo   func()
}

// Began implements realtime.ActiveFault: the member struck, and the
// delay of its traffic, if that is the fault.
func (f *memberFault) Began() (target, detail string) {
	if f.delay > 0 {
		detail = "traffic delayed " + history.FormatDuration(f.delay)
	}
	return spec.MemberTarget(f.member, f.leader), detail
}

// End implements realtime.ActiveFault: the member resumed, healed, or its
// traffic no longer delayed.
func (f *memberFault) End(context.Context) realtime.FaultOutcome {
	f.undo()
	return realtime.FaultOutcome{}
}
