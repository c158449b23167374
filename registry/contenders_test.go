package registry_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

func TestParseContenders(t *testing.T) {
	for _, tc := range []struct {
		list []string
		want []history.Mode
		err  string // a part of the refusal
	}{
		{list: []string{"naive", "fenced"}, want: []history.Mode{"naive", "fenced"}},
		{list: []string{" redsync", "redislock ", "fenced"}, want: []history.Mode{"redsync", "redislock", "fenced"}},
		{list: []string{"etcd-mutex:naive", "etcd-mutex-fenced:fenced"}, want: []history.Mode{"etcd-mutex", "etcd-mutex-fenced"}},
		{list: []string{"chubby"}, err: "contender chubby: no contender has that name; they are naive, fenced,"},
		{list: []string{"zookeeper:fenced"}, err: "zookeeper writes naive; the fenced discipline is the contender zookeeper-fenced"},
		{list: []string{""}, err: "an empty name"},
		{list: nil, err: "no contender named"},
		{list: []string{"fenced", "fenced"}, err: "contender fenced: named twice"},
		{list: []string{"redsync:fenced"}, err: "redsync's leases have no fence, so its holders cannot write through the gate; run it naive (redsync)"},
		{list: []string{"redislock:fenced"}, err: "choose a contender with a fence: fenced, etcd-mutex-fenced"},
		{list: []string{"etcd-mutex:fenced"}, err: "etcd-mutex writes naive; the fenced discipline is the contender etcd-mutex-fenced"},
		{list: []string{"etcd-mutex-fenced:naive"}, err: "the naive discipline is the contender etcd-mutex"},
		{list: []string{"redsync:sideways"}, err: `the discipline must be naive or fenced, got "sideways"`},
	} {
		got, err := registry.ParseContenders(tc.list)
		switch {
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%q: %v, %v; want %v", tc.list, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, registry.ErrContender)):
			t.Errorf("%q: %v, want a refusal saying %q", tc.list, err, tc.err)
		}
	}
}

// A contender is refused where it cannot run, naming where it can: a
// library's lock on the simulator, a fault of the lab's own coordinator.
func TestCheckContenders(t *testing.T) {
	gap, restarts := builtin(t, "gap"), builtin(t, "restart-lost")
	for _, tc := range []struct {
		modes   []history.Mode
		backend string
		err     string
	}{
		{modes: registry.Modes(), backend: registry.Sim},
		{modes: []history.Mode{"redsync", "fenced"}, backend: registry.Memory},
		{modes: []history.Mode{"etcd-mutex"}, backend: registry.Redis},
		{modes: []history.Mode{"fenced", "redsync"}, backend: registry.Sim,
			err: "contender redsync: a library's lock runs in real time, not on the simulator: it runs on --backend memory, etcd or redis"},
		{modes: []history.Mode{"nope"}, backend: registry.Memory, err: "contender nope: no contender has that name"},
	} {
		err := registry.CheckContenders(tc.modes, tc.backend, gap)
		if (tc.err == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.err) || !errors.Is(err, registry.ErrContender))) {
			t.Errorf("%v on %s: %v, want %q", tc.modes, tc.backend, err, tc.err)
		}
	}
	for _, name := range registry.Names(registry.Contenders) {
		err := registry.CheckContenders([]history.Mode{history.Mode(name)}, registry.Memory, restarts)
		// The lab restarts its own coordinator, one of redlock's
		// servers and pg-advisory's sessions; no other library's lock.
		if canRestart := !registry.Library(history.Mode(name)) || name == registry.Redlock || name == registry.PgAdvisory; canRestart != (err == nil) {
			t.Errorf("%s on a scenario with coordinator restarts: %v", name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "the contenders that can: naive, fenced, redlock") {
			t.Errorf("%s: %v: want the contenders that can play it", name, err)
		}
	}
	// A library's lock keeps its own time on its own server: the lab's
	// coordinator drift is refused for it, naming the flag, rather than
	// skewing the lab's dating of its deadlines (overlap, --backend memory,
	// --coordinator-drift-ppm -100000 had redsync and redislock "violate"
	// mutual exclusion at every handover).
	drifted := builtin(t, "overlap")
	drifted.Clocks.CoordinatorDriftPPM = -100000
	for _, name := range registry.Names(registry.Contenders) {
		err := registry.CheckContenders([]history.Mode{history.Mode(name)}, registry.Memory, drifted)
		if registry.Library(history.Mode(name)) != (err != nil) {
			t.Errorf("%s on a scenario with the coordinator's clock drifted: %v", name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "contender "+name+": cannot play the lab coordinator's clock drift, --coordinator-drift-ppm") {
			t.Errorf("%s: %v: want the contender and the flag named", name, err)
		}
	}
	// A failover of the Redis primary strikes the locks on the backend's
	// Redis: the lab's, and redsync's and redislock's, which share it; the
	// others' servers are their own, and never fail over.
	failover := builtin(t, "overlap")
	failover.Faults = []spec.TimedFault{{At: time.Second, Do: spec.FaultPartitionPrimary, Duration: 4 * time.Second}}
	sharesRedis := func(name string) bool {
		return !registry.Library(history.Mode(name)) || name == registry.Redsync || name == registry.Redislock
	}
	can := slices.DeleteFunc(registry.Names(registry.Contenders), func(n string) bool { return !sharesRedis(n) })
	for _, name := range registry.Names(registry.Contenders) {
		err := registry.CheckContenders([]history.Mode{history.Mode(name)}, registry.Redis, failover)
		if sharesRedis(name) != (err == nil) {
			t.Errorf("%s on a scenario with a failover of the Redis primary: %v", name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "the contenders that can: "+strings.Join(can, ", ")) {
			t.Errorf("%s: %v: want the contenders that can play it, %v", name, err, can)
		}
	}
}
