package etcdbackend_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/etcdbackend"
	"github.com/leasefence/lab/realtime/etcdcluster"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// TestMain lets this test binary be an etcd member: a cluster of several
// members runs each as a process of the running binary.
func TestMain(m *testing.M) {
	etcdcluster.ServeMemberIfAsked()
	os.Exit(m.Run())
}

// memberScenario is the overlap scenario on three members, with the
// leader paused at 2 s and the leader (then) partitioned at 5 s.
func memberScenario(d time.Duration) spec.Scenario {
	sc, _ := spec.Builtin("overlap")
	sc.Duration = d
	sc.Agent.Stall.TailP = 0.5
	sc.Etcd = spec.Etcd{Members: 3}
	sc.Faults = []spec.TimedFault{
		{At: 2 * time.Second, Do: spec.FaultPauseLeader, Duration: 2 * time.Second},
		{At: 5 * time.Second, Do: spec.FaultPartitionMember, Duration: 2 * time.Second},
	}
	return sc
}

// A paused leader and a partitioned leader of a three-member cluster: both
// faults are played on the leader of the moment, recorded in the history
// (which reads back), and the fenced mode stays clean through them.
func TestEtcdMemberFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three etcd members for several seconds")
	}
	s := runtest.EtcdSetup(t, 0, memberScenario(8*time.Second))
	if s.Backend.(*etcdbackend.Etcd).Members() == nil {
		t.Fatal("the three members do not run as processes")
	}
	res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
	runtest.AssertInvariants(t, res)
	runtest.CheckRoundTrip(t, res, file)
	for _, m := range res.Modes {
		played := m.FaultsOnServers
		if len(played) != 2 {
			t.Fatalf("%s: member faults played: %+v, want 2", m.Mode, played)
		}
		for i, want := range []spec.Fault{spec.FaultPauseLeader, spec.FaultPartitionMember} {
			f := played[i]
			if f.Fault != string(want) || f.NotPlayed || !strings.HasSuffix(f.Target, "(the leader)") || f.DurationMS != 2000 || f.EndedMS < f.AtMS+2000 {
				t.Errorf("%s: member fault %d: %+v, want %s of the leader for 2s", m.Mode, i, f, want)
			}
		}
	}
	if n := strings.Count(string(file), `"kind":"fault_began"`); n != 4 {
		t.Errorf("the history has %d fault_began events, want 2 per mode", n)
	}
	if n := strings.Count(string(file), `"kind":"fault_ended"`); n != 4 {
		t.Errorf("the history has %d fault_ended events, want 2 per mode", n)
	}
	if f := res.Modes[history.Fenced]; f.CommitsAdmitted == 0 {
		t.Error("fenced: no commit landed through the faults")
	}
}

// A run on member processes interrupted in the middle of a partition (as
// Ctrl-C or SIGTERM of lab does), then closed, leaves no member process,
// no proxy port and no directory behind.
func TestEtcdMembersInterruptLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Etcd, TempDir: parent}, memberScenario(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cl := s.Backend.(*etcdbackend.Etcd).Members()
	pids, eps := cl.Pids(), cl.Endpoints()
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	res, err := s.Run(ctx, realtime.RunOptions{Modes: []history.Mode{history.Fenced}})
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || len(res.Modes[history.Fenced].FaultsOnServers) != 2 {
		t.Fatalf("interrupted run: %+v, %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("member process %d still runs", pid)
		}
	}
	for _, ep := range eps {
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(ep, "http://"), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections", ep)
		}
	}
	if left, _ := os.ReadDir(parent); len(left) > 0 {
		t.Errorf("left behind in %s: %v", parent, left)
	}
}

// Config.Check refuses a cluster the scenario asks for that the
// configuration cannot give, naming the setting.
func TestConfigCheckMembers(t *testing.T) {
	faults := memberScenario(8 * time.Second)
	noSize := faults
	noSize.Etcd.Members = 0
	for _, tc := range []struct {
		name    string
		c       realtime.Config
		sc      spec.Scenario
		setting string // "" when it is accepted
	}{
		{"the scenario's size", realtime.Config{Backend: "etcd"}, faults, ""},
		{"the flag's size", realtime.Config{Backend: "etcd", EtcdMembers: 5}, noSize, ""},
		{"too few for faults", realtime.Config{Backend: "etcd"}, noSize, "etcd-members"},
		{"sizes disagree", realtime.Config{Backend: "etcd", EtcdMembers: 5}, faults, "etcd-members"},
		{"not etcd", realtime.Config{Backend: "memory"}, faults, "scenario"},
		{"given endpoints", realtime.Config{Backend: "etcd", EtcdEndpoints: []string{"http://127.0.0.1:2379"}}, faults, "scenario"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Check(tc.sc)
			var ce *realtime.ConfigError
			switch {
			case tc.setting == "" && err != nil:
				t.Fatal(err)
			case tc.setting != "" && (!errors.As(err, &ce) || ce.Setting != tc.setting):
				t.Fatalf("got %v, want a problem with %s", err, tc.setting)
			}
		})
	}
}
