package etcdtest_test

import (
	"testing"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdtest"
)

func TestMemberKeepsItsDataAcrossARestart(t *testing.T) {
	m, cli := etcdtest.NewMember(t)
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if !m.IsLeader() {
		t.Fatal("a single member is not its own leader")
	}
	m.Stop()
	if m.Running() {
		t.Fatal("running after Stop")
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(t.Context(), "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get after restart = %v, %v", resp, err)
	}
}

func TestClusterElectsAnotherLeader(t *testing.T) {
	c, cli := etcdtest.NewCluster(t, 3)
	old, err := c.WaitLeader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	old.Stop()
	now, err := c.WaitLeader(t.Context())
	if err != nil || now == old {
		t.Fatalf("leader after stopping %s: %v, %v", old.Name, now, err)
	}
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatalf("Put with one member down: %v", err)
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if !old.Running() {
		t.Fatal("stopped member not restarted")
	}
}
