package registry_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

func builtin(t *testing.T, name string) spec.Scenario {
	t.Helper()
	sc, ok := spec.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %s", name)
	}
	return sc
}

// Every entry has a name unique in its kind and says what it is; every
// feature has a kind that plays it somewhere, or a refusal could not say
// where to go.
func TestTable(t *testing.T) {
	for _, k := range []*registry.Kind{registry.Backends, registry.Stores, registry.Drivers, registry.Contenders} {
		names := registry.Names(k)
		if len(names) == 0 {
			t.Errorf("no %s", k.Name)
		}
		for i, n := range names {
			if slices.Index(names, n) != i {
				t.Errorf("%s %q twice", k.Name, n)
			}
			if e := registry.Must(k, n); e.Doc == "" || e.Kind != k {
				t.Errorf("%s %q: doc %q, kind %v", k.Name, n, e.Doc, e.Kind.Name)
			}
		}
	}
	for _, f := range registry.Features {
		plays := 0
		for _, e := range registry.All(f.Kind) {
			if e.PlaysFeature(f) {
				plays++
			}
		}
		if plays == 0 || f.Field == "" || f.What == "" {
			t.Errorf("feature %s: played by %d %s entries, field %q", f.Name, plays, f.Kind.Name, f.Field)
		}
	}
}

// A refusal names the entry, what it cannot play, and the choices that
// can; it matches ErrCannotPlay and the feature's own error.
func TestCanPlay(t *testing.T) {
	sim := registry.Must(registry.Backends, registry.Sim)
	if err := sim.CanPlay(builtin(t, "gap")); err != nil {
		t.Fatalf("the simulator refuses gap: %v", err)
	}
	sc := builtin(t, "gap")
	sc.Crashes = []spec.Crash{{Agent: "agent-1", At: 1}}
	err := sim.CanPlay(sc)
	if !errors.Is(err, registry.ErrCannotPlay) || !errors.Is(err, spec.ErrNeedsProcesses) {
		t.Fatalf("crashes on the simulator: %v, want ErrCannotPlay and ErrNeedsProcesses", err)
	}
	if want := "backend sim cannot play crashes of agents (crashes), which only agents run as processes suffer: use --agents-as process"; err.Error() != want {
		t.Errorf("refusal\n%s\nwant\n%s", err, want)
	}
	sc = builtin(t, "gap")
	sc.Forgers = []spec.Forgery{spec.ForgeOwnKey}
	for _, st := range registry.All(registry.Stores) {
		err := st.CanPlay(sc)
		if (st.Name == registry.HTTP) != (err == nil) {
			t.Errorf("store %s on forgers: %v", st.Name, err)
		}
		if err != nil && (!errors.Is(err, spec.ErrOverTheWire) || !strings.HasSuffix(err.Error(), "use --resource http")) {
			t.Errorf("store %s: %v", st.Name, err)
		}
	}
	sc = builtin(t, "gap")
	sc.Push.Enabled = true
	if err := registry.CanPlayAll(sc, registry.Must(registry.Drivers, registry.InProcess), registry.Must(registry.Drivers, registry.Process)); err == nil ||
		!strings.Contains(err.Error(), "agents process cannot play the gate push") {
		t.Errorf("push as processes: %v", err)
	}
	// A lock-delay is the lab coordinator's, on every backend: a
	// library's lock has none, and refuses it rather than run without it.
	sc = builtin(t, "lock-delay")
	sc.LockDelay = time.Second
	for _, b := range registry.All(registry.Backends) {
		if err := b.CanPlay(sc); err != nil {
			t.Errorf("backend %s on lock_delay: %v", b.Name, err)
		}
	}
	for _, c := range registry.All(registry.Contenders) {
		err := c.CanPlay(sc)
		if (c.Library == registry.Lab) != (err == nil) {
			t.Errorf("contender %s on lock_delay: %v", c.Name, err)
		}
		if want := "contender " + c.Name + " cannot play the lab coordinator's lock-delay (lock_delay): use --contenders naive or fenced"; err != nil && err.Error() != want {
			t.Errorf("refusal\n%s\nwant\n%s", err, want)
		}
	}
}

func TestRunsOn(t *testing.T) {
	proc := registry.Must(registry.Drivers, registry.Process)
	if err := proc.RunsOnBackend(registry.Etcd); err != nil {
		t.Error(err)
	}
	if err := proc.RunsOnBackend(registry.Memory); err == nil || err.Error() != `agents process needs backend etcd, redis or postgres, got "memory"` {
		t.Errorf("processes on memory: %v", err)
	}
	if err := proc.WorksWith(registry.Memory); err == nil || err.Error() != `agents process needs resource sqlite, etcd, redis or postgres, got "memory"` {
		t.Errorf("processes with gates in memory: %v", err)
	}
	for backend, want := range map[string]string{registry.Memory: registry.Memory, registry.Etcd: registry.Etcd, registry.Redis: registry.Redis} {
		if got := registry.StoreFor(backend, ""); got != want {
			t.Errorf("StoreFor(%s) = %s, want %s", backend, got, want)
		}
	}
	if got := registry.StoreFor(registry.Etcd, registry.SQLite); got != registry.SQLite {
		t.Errorf("StoreFor(etcd, sqlite) = %s", got)
	}
}

func TestChoice(t *testing.T) {
	if err := registry.Choice(registry.Backends, "zookeeper"); err == nil || err.Error() != `must be sim, memory, etcd, redis, postgres, got "zookeeper"` {
		t.Errorf("backend zookeeper: %v", err)
	}
	if err := registry.Choice(registry.Drivers, "threads"); err == nil || err.Error() != `must be in-process or process, got "threads"` {
		t.Errorf("agents threads: %v", err)
	}
	if err := registry.Choice(registry.Stores, registry.SQLite); err != nil {
		t.Error(err)
	}
}

func TestParseModes(t *testing.T) {
	for in, want := range map[string]int{"both": 2, "": 2, "fenced": 1, "naive": 1} {
		got, err := registry.ParseModes(in)
		if err != nil || len(got) != want {
			t.Errorf("ParseModes(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := registry.ParseModes("sloppy"); !errors.Is(err, spec.ErrInvalidScenario) {
		t.Errorf("ParseModes(sloppy) = %v", err)
	}
	if !slices.Equal(registry.Modes(), []history.Mode{history.Naive, history.Fenced}) {
		t.Errorf("Modes() = %v, want naive, fenced (the reports' order)", registry.Modes())
	}
}

// The modes ParseModes returns are the caller's: writing over them changes
// neither the next answer nor Modes.
func TestParseModesReturnsACopy(t *testing.T) {
	for _, in := range []string{"both", "", "fenced", "naive"} {
		got, err := registry.ParseModes(in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			got[i] = "sloppy"
		}
		again, err := registry.ParseModes(in)
		if err != nil || slices.Contains(again, "sloppy") || slices.Contains(registry.Modes(), "sloppy") {
			t.Errorf("ParseModes(%q) after its last answer was overwritten = %v, %v", in, again, err)
		}
	}
}

func TestOpeners(t *testing.T) {
	type opener func() int
	if _, ok := registry.Opener[opener](registry.Stores, registry.SQLite); ok {
		t.Fatal("an opener before any was set")
	}
	defer func() {
		if recover() == nil {
			t.Error("SetOpener of a name the table lacks did not panic")
		}
	}()
	registry.SetOpener(registry.Stores, "tape", opener(func() int { return 1 }))
}

// Where a scenario can run: everywhere for gap; crashes only on etcd and
// redis (the backends agents as processes run on); forgers nowhere but on
// a real backend, with the http store.
func TestWhere(t *testing.T) {
	if got := registry.Where(builtin(t, "gap")); !slices.Equal(got, []string{registry.Sim, registry.Memory, registry.Etcd, registry.Redis, registry.Postgres}) {
		t.Errorf("gap runs on %v", got)
	}
	sc := builtin(t, "gap")
	sc.Crashes = []spec.Crash{{Agent: "agent-1", At: 1}}
	if got := registry.Where(sc); !slices.Equal(got, []string{registry.Etcd, registry.Redis, registry.Postgres}) {
		t.Errorf("crashes run on %v, want etcd, redis and postgres", got)
	}
	sc = builtin(t, "gap")
	sc.Forgers = []spec.Forgery{spec.ForgeOwnKey}
	if got := registry.Where(sc); !slices.Equal(got, []string{registry.Memory, registry.Etcd, registry.Redis}) {
		t.Errorf("forgers run on %v", got)
	}
}

// Each runner says in the one list's words which faults it plays: the
// simulator all but member faults and crashes, agents as processes none
// of the fault layer's.
func TestFaults(t *testing.T) {
	members := spec.MemberFaults
	for _, tc := range []struct {
		e    *registry.Entry
		want []spec.Fault
	}{
		{registry.Must(registry.Backends, registry.Sim), []spec.Fault{spec.FaultPartition, spec.FaultRestart, spec.FaultDrop, spec.FaultPush}},
		{registry.Must(registry.Backends, registry.Etcd), slices.Concat([]spec.Fault{spec.FaultPartition, spec.FaultRestart, spec.FaultCrash}, members, []spec.Fault{spec.FaultDrop, spec.FaultPush})},
		{registry.Must(registry.Backends, registry.Redis), slices.Concat([]spec.Fault{spec.FaultPartition, spec.FaultRestart, spec.FaultCrash, spec.FaultDrop, spec.FaultPush}, spec.RedisFaults)},
		{registry.Must(registry.Drivers, registry.Process), append([]spec.Fault{spec.FaultCrash}, members...)},
		{registry.Must(registry.Drivers, registry.InProcess), slices.Concat([]spec.Fault{spec.FaultPartition, spec.FaultRestart}, members, []spec.Fault{spec.FaultDrop, spec.FaultPush}, spec.RedisFaults, []spec.Fault{spec.FaultKillConnections})},
		{registry.Must(registry.Stores, registry.SQLite), spec.Faults},
	} {
		if got := tc.e.Faults(); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s plays %v, want %v", tc.e.Kind.Name, tc.e.Name, got, tc.want)
		}
	}
	for _, f := range registry.Features {
		if f.Fault != "" && (f.Field != f.Fault.Field() || !slices.Contains(spec.Faults, f.Fault)) {
			t.Errorf("feature %s: field %q, fault %q", f.Name, f.Field, f.Fault)
		}
	}
	// Every fault kind has its one feature, which the kind's scenario
	// asks for, and a backend that plays it.
	for _, f := range spec.Faults {
		ft := registry.FaultFeature(f)
		if ft.Fault != f || ft.Name != string(f) {
			t.Errorf("fault %s: feature %s", f, ft.Name)
		}
		if len(registry.Where(faultScenario(t, f))) == 0 {
			t.Errorf("no backend plays %s", f)
		}
	}
}

// A new fault kind that no entry states it plays is refused by every
// backend, naming the kind: an entry plays only what it says it plays.
func TestUnstatedFaultRefused(t *testing.T) {
	sc := faultScenario(t, spec.FaultPauseLeader)
	for _, b := range registry.All(registry.Backends) {
		err := b.CanPlay(sc)
		plays := slices.Contains(b.Plays, spec.FaultPauseLeader)
		if (err == nil) != plays {
			t.Errorf("backend %s: CanPlay %v, though it states %v", b.Name, err, b.Plays)
		}
		if err != nil && (!errors.Is(err, spec.ErrNeedsEtcd) || !strings.Contains(err.Error(), "pause_leader")) {
			t.Errorf("backend %s: %v, want ErrNeedsEtcd naming pause_leader", b.Name, err)
		}
	}
	if fmt.Sprint(func() (r any) { defer func() { r = recover() }(); registry.FaultFeature("pause_replica"); return nil }()) == "<nil>" {
		t.Error("FaultFeature of a kind spec does not list did not panic")
	}
}

// faultScenario is a scenario that asks for fault f alone.
func faultScenario(t *testing.T, f spec.Fault) spec.Scenario {
	t.Helper()
	sc := builtin(t, "gap")
	sc.Push.Enabled = false
	sc.Network.DropRequests, sc.Network.DropReplies, sc.Network.Duplicate = 0, 0, 0
	sc.Partitions, sc.Restarts, sc.Crashes, sc.Faults = nil, nil, nil, nil
	switch {
	case f == spec.FaultPartition:
		sc.Partitions = []spec.Partition{{Agent: spec.AgentName(0), From: time.Second, To: 2 * time.Second}}
	case f == spec.FaultRestart:
		sc.Restarts = []spec.Restart{{At: time.Second}}
	case f == spec.FaultCrash:
		sc.Crashes = []spec.Crash{{Agent: spec.AgentName(0), At: time.Second}}
	case slices.Contains(spec.MemberFaults, f):
		sc.Faults = []spec.TimedFault{{At: time.Second, Do: f, Duration: time.Second}}
	case f == spec.FaultDrop:
		sc.Network.Duplicate = 0.1
	case f == spec.FaultPush:
		sc.Push.Enabled = true
	case slices.Contains(spec.RedisFaults, f):
		sc.Faults = []spec.TimedFault{{At: time.Second, Do: f, Duration: spec.MinRedisFault}}
	case f == spec.FaultKillConnections:
		sc.Faults = []spec.TimedFault{{At: time.Second, Do: f, Duration: time.Second}}
	}
	for _, g := range spec.Faults {
		if sc.Has(g) != (g == f) {
			t.Fatalf("the scenario of %s asks for %s: %v", f, g, sc.Has(g))
		}
	}
	return sc
}

// A header describes the contenders that are not the lab's own two, and
// so says nothing new of naive and fenced.
func TestDescribe(t *testing.T) {
	if got := registry.Describe([]history.Mode{history.Naive, history.Fenced}); got != nil {
		t.Errorf("Describe(naive, fenced) = %v, want nil", got)
	}
	for _, c := range registry.All(registry.Contenders) {
		if c.Library != registry.Lab {
			continue // a library contender the header describes (Describe)
		}
		h := history.Header{}
		if got := c.Contender(); got.Fence != h.Contender(got.Name).Fence || got.Discipline != h.Contender(got.Name).Discipline {
			t.Errorf("contender %s: the registry says %+v, the history %+v", c.Name, got, h.Contender(got.Name))
		}
	}
}

// Agents as processes run on what every process of a run can reach, and
// the registry refuses the rest by name, saying what to use: the
// in-memory coordinator and gates live in the lab's own process.
func TestShares(t *testing.T) {
	proc := registry.Must(registry.Drivers, registry.Process)
	if !slices.Equal(proc.RunsOn, []string{registry.Etcd, registry.Redis, registry.Postgres}) ||
		!slices.Equal(proc.Stores, []string{registry.SQLite, registry.Etcd, registry.Redis, registry.Postgres}) {
		t.Errorf("agents as processes run on %v with %v", proc.RunsOn, proc.Stores)
	}
	for _, tc := range []struct {
		e    *registry.Entry
		want string
	}{
		{registry.Must(registry.Backends, registry.Memory), "backend memory cannot be shared by agents as processes: it lives in one process; use --backend etcd, redis or postgres"},
		{registry.Must(registry.Stores, registry.Memory), "resource memory cannot be shared by agents as processes: it lives in one process; use --resource sqlite, etcd, redis or postgres"},
		{registry.Must(registry.Stores, registry.HTTP), "resource http cannot be shared by agents as processes: it lives in one process; use --resource sqlite, etcd, redis or postgres"},
		{&registry.Entry{Kind: registry.Contenders, Name: "mine"}, "contender mine cannot be shared by agents as processes: it lives in one process; use --contenders naive, fenced, etcd-mutex, etcd-mutex-fenced, redsync, redislock, redlock, zookeeper, zookeeper-fenced, pg-advisory, k8s-leaderelection or k8s-leaderelection-fenced"},
		{registry.Must(registry.Backends, registry.Redis), ""},
		{registry.Must(registry.Stores, registry.SQLite), ""},
	} {
		err := proc.Shares(tc.e)
		if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || err != nil && got != tc.want {
			t.Errorf("%s %s: %v, want %q", tc.e.Kind.Name, tc.e.Name, err, tc.want)
		}
		if err := registry.Must(registry.Drivers, registry.InProcess).Shares(tc.e); err != nil {
			t.Errorf("goroutines sharing %s %s: %v", tc.e.Kind.Name, tc.e.Name, err)
		}
	}
	for _, c := range registry.All(registry.Contenders) {
		if err := proc.Shares(c); err != nil {
			t.Errorf("every built-in contender runs as processes: %v", err)
		}
	}
}

// An entry has one opener of each type: one that starts it and one that
// attaches to it from another process live side by side.
func TestOpenersByType(t *testing.T) {
	type starter func() int
	type attacher func(string) int
	registry.SetOpener(registry.Contenders, registry.Redlock, starter(func() int { return 1 }))
	registry.SetOpener(registry.Contenders, registry.Redlock, attacher(func(string) int { return 2 }))
	s, ok1 := registry.Opener[starter](registry.Contenders, registry.Redlock)
	a, ok2 := registry.Opener[attacher](registry.Contenders, registry.Redlock)
	if !ok1 || !ok2 || s() != 1 || a("") != 2 {
		t.Fatalf("openers by type: %v %v", ok1, ok2)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second opener of one type did not panic")
		}
	}()
	registry.SetOpener(registry.Contenders, registry.Redlock, starter(func() int { return 3 }))
}
