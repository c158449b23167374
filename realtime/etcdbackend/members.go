package etcdbackend

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

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
	if sc.Etcd.Members == 0 && len(sc.Etcd.Faults) == 0 {
		return nil
	}
	if c.Backend != registry.Etcd {
		return bad("scenario", "it sets an etcd cluster (etcd.members, etcd.faults), which needs backend etcd")
	}
	if len(c.EtcdEndpoints) > 0 {
		return bad("scenario", "it sets an etcd cluster (etcd.members, etcd.faults), which only an embedded etcd plays: drop --etcd-endpoints")
	}
	n := clusterSize(c, sc)
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

// FaultMembers implements realtime.MemberBackend: the member processes,
// or nil when the members are not processes.
func (e *Etcd) FaultMembers() realtime.Members {
	if cl := e.Members(); cl != nil {
		return cl
	}
	return nil
}
