package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
)

// A contender whose adapter is a module of its own is refused, before
// anything runs, by a program that does not link it (this test, as the
// lab's own build), saying how to run it; a contender this program can
// run is not.
func TestApart(t *testing.T) {
	sc := builtin(t, "overlap")
	for _, name := range []string{registry.K8sLeaderElection, registry.K8sLeaderElectionFenced} {
		err := registry.CheckContenders([]history.Mode{history.Mode(name)}, registry.Memory, sc)
		if !errors.Is(err, registry.ErrContender) || !strings.Contains(err.Error(), "contender "+name+": its adapter is a module of its own") ||
			!strings.Contains(err.Error(), "realtime/k8slease/lab.sh") {
			t.Errorf("%s, its adapter not linked: %v, want a refusal naming realtime/k8slease/lab.sh", name, err)
		}
	}
	if err := registry.CheckContenders([]history.Mode{registry.EtcdMutex}, registry.Memory, sc); err != nil {
		t.Errorf("etcd-mutex, whose adapter is the lab's: %v", err)
	}
}
