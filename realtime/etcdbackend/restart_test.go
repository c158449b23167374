package etcdbackend_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/spec"
)

// A restart of etcd on its members' data keeps its leases, as well as the
// fence counters and the floors: the history records it as the server's
// restart (realtime.LeaseKeeper), not the coordinator's, which would have
// the checker forget every lease etcd kept and excuse a second grant of
// one; and the run holds every invariant across it.
func TestPersistedRestartKeepsTheLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd for several seconds")
	}
	t.Parallel()
	sc, _ := spec.Builtin("restart-persisted")
	sc.Duration = 4 * time.Second
	sc.Restarts[0].At = 2 * time.Second
	s := runtest.EtcdSetup(t, 0, sc)
	res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
	runtest.CheckRoundTrip(t, res, file)
	runtest.AssertInvariants(t, res)
	for _, m := range []history.Mode{history.Naive, history.Fenced} {
		r := res.Modes[m]
		if len(r.FaultsOnServers) != 1 || r.FaultsOnServers[0].Fault != string(spec.FaultRestart) || !strings.HasPrefix(r.FaultsOnServers[0].Target, "etcd") {
			t.Errorf("%s: faults on servers %+v, want the restart of etcd", m, r.FaultsOnServers)
		}
		if m == history.Fenced && (r.FenceReuses != 0 || r.CommitsAdmitted == 0) {
			t.Errorf("fenced across the restart: %+v", r)
		}
	}
}
