package registry

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// The names, as the command line, fixture files and reports spell them.
const (
	Sim      = history.Simulator // backend: the deterministic simulator
	Memory   = "memory"          // backend: the in-memory coordinator; store: gates in memory
	Etcd     = "etcd"            // backend: leases on etcd; store: gates in the backend's etcd
	Redis    = "redis"           // backend: leases on Redis; store: gates in the backend's Redis
	Postgres = "postgres"        // backend: leases in PostgreSQL; store: gates in the backend's PostgreSQL
	SQLite   = "sqlite"          // store: gates in a SQLite file
	HTTP     = "http"            // store: a server per resource verifying signed proofs

	InProcess = "in-process" // driver: agents as goroutines
	Process   = "process"    // driver: each agent an OS process

	EtcdMutex       = "etcd-mutex"        // contender: etcd's concurrency.Mutex, written to naively
	EtcdMutexFenced = "etcd-mutex-fenced" // contender: the same Mutex, its key's create revision the fence
	Redsync         = "redsync"           // contender: go-redsync/redsync v4 on one Redis
	Redislock       = "redislock"         // contender: bsm/redislock
	Redlock         = "redlock"           // contender: redsync's quorum over RedlockServers redis-servers
	ZooKeeper       = "zookeeper"         // contender: go-zookeeper/zk's Lock, written to naively
	ZooKeeperFenced = "zookeeper-fenced"  // contender: the same Lock, its znode's czxid the fence
	PgAdvisory      = "pg-advisory"       // contender: PostgreSQL's session-level advisory lock through a pooled *sql.DB

	K8sLeaderElection       = "k8s-leaderelection"        // contender: client-go's LeaderElector, written to naively
	K8sLeaderElectionFenced = "k8s-leaderelection-fenced" // contender: the same elector, the revision that acquired its Lease the fence
)

// RedlockServers is how many independent redis-servers the redlock
// contender runs on: redsync's Redlock algorithm takes a lock on a
// majority of them.
const RedlockServers = 3

// Lab is the Library of the lab's own contenders, naive and fenced.
const Lab = history.LabLibrary

// etcdClient is the module of etcd's client, whose concurrency package
// the etcd-mutex contenders run.
const etcdClient = "go.etcd.io/etcd/client/v3"

// etcdMutexNA is what etcd's Mutex cannot express of the lease contract:
// its Unlock is a Delete of its own key (named by its session's lease, so
// never another holder's), which succeeds whether or not the key is still
// there. The other libraries can: redsync's Unlock returns
// ErrLockAlreadyExpired, redislock's Release ErrLockNotHeld, and zk's
// Lock.Unlock the Delete's ErrNoNode once the lock znode is gone.
var etcdMutexNA = map[history.ContractRule]string{
	history.RuleReleaseAfterEnd: "etcd's Mutex.Unlock is a delete that cannot say the lease was gone",
}

// zkClient is the module of go-zookeeper's client, whose Lock the
// zookeeper contenders run.
const zkClient = "github.com/go-zookeeper/zk"

// pgx is the module of the PostgreSQL driver (its database/sql driver,
// stdlib) through which the pg-advisory contender takes PostgreSQL's own
// advisory locks.
const pgx = "github.com/jackc/pgx/v5"

// k8sElection is client-go's leaderelection package, which the
// k8s-leaderelection contenders run, and K8sClientVersion the version of
// k8s.io/client-go their module (realtime/k8slease) pins.
const (
	k8sElection      = "k8s.io/client-go/tools/leaderelection"
	K8sClientVersion = "v0.37.2"
)

// k8sApart is how to run the k8s-leaderelection contenders: their adapter
// is a module of its own, which the lab's build leaves out, since
// client-go's cold compile costs more than the rest of the lab's.
const k8sApart = "run realtime/k8slease/lab.sh with the same arguments: the lab built with that module"

// agentFaults are the fault kinds every real backend plays: those of the
// fault layer between agents and coordinator, the restart of its
// coordinator, and the crashes of agents run as processes.
var agentFaults = []spec.Fault{spec.FaultPartition, spec.FaultRestart, spec.FaultCrash, spec.FaultDrop, spec.FaultPush}

// table is every entry, each kind in the order listings show it; the
// first of a kind is its default.
var table = []*Entry{
	{Kind: Backends, Name: Sim, Doc: "the deterministic simulator: virtual time, same seed same history",
		Plays:   []spec.Fault{spec.FaultPartition, spec.FaultRestart, spec.FaultDrop, spec.FaultPush},
		Refuses: []*Feature{OverTheWire}},
	{Kind: Backends, Name: Memory, Doc: "agents in real time on the in-memory coordinator", Real: true,
		Plays: agentFaults, Refuses: []*Feature{EtcdMembers, Interventions}},
	{Kind: Backends, Name: Etcd, Doc: "agents in real time on etcd (embedded, or --etcd-endpoints)", Real: true, Shared: true,
		Needs: Needs{Server: "etcd"}, Plays: slices.Concat(agentFaults, spec.MemberFaults), Refuses: []*Feature{Interventions}},
	{Kind: Backends, Name: Redis, Doc: "agents in real time on Redis (a throwaway redis-server, or --redis-url)", Real: true, Shared: true,
		Needs: Needs{Server: "redis-server"}, Plays: slices.Concat(agentFaults, spec.RedisFaults), Refuses: []*Feature{EtcdMembers, Interventions}},
	{Kind: Backends, Name: Postgres, Doc: "agents in real time on PostgreSQL (sqllease, in a schema of the run's own on the server $LEASEFENCE_PG_URL names); its fault kills the run's connections (faults, do: kill_connections); " +
		"a scenario with restarts runs on a server of the run's own, which each restart crashes and starts again on its data", Real: true, Shared: true,
		Needs: Needs{Server: "postgresql"}, Plays: []spec.Fault{spec.FaultPartition, spec.FaultRestart, spec.FaultCrash, spec.FaultDrop, spec.FaultPush, spec.FaultKillConnections}, Refuses: []*Feature{EtcdMembers, Interventions, OverTheWire}},

	{Kind: Stores, Name: Memory, Doc: "gates in memory", Real: true, Refuses: []*Feature{OverTheWire}},
	{Kind: Stores, Name: SQLite, Doc: "gates in a temporary SQLite file", Real: true, Shared: true, Refuses: []*Feature{OverTheWire}},
	{Kind: Stores, Name: Etcd, Doc: "gates in the backend's etcd", Real: true, Shared: true, RunsOn: []string{Etcd},
		Needs: Needs{Server: "etcd"}, Refuses: []*Feature{OverTheWire}},
	{Kind: Stores, Name: HTTP, Doc: "a server per resource on a loopback port, verifying signed proofs", Real: true,
		Needs: Needs{Server: "a loopback HTTP server per resource"}},
	{Kind: Stores, Name: Redis, Doc: "gates in the backend's Redis", Real: true, Shared: true, RunsOn: []string{Redis},
		Needs: Needs{Server: "redis-server"}, Refuses: []*Feature{OverTheWire}},
	{Kind: Stores, Name: Postgres, Doc: "gates in the backend's PostgreSQL (sqlgate)", Real: true, Shared: true, RunsOn: []string{Postgres},
		Needs: Needs{Server: "postgresql"}, Refuses: []*Feature{OverTheWire}},

	{Kind: Drivers, Name: InProcess, Doc: "agents as goroutines", Real: true,
		Plays: slices.Concat([]spec.Fault{spec.FaultPartition, spec.FaultRestart}, spec.MemberFaults, []spec.Fault{spec.FaultDrop, spec.FaultPush}, spec.RedisFaults, []spec.Fault{spec.FaultKillConnections})},
	{Kind: Drivers, Name: Process, Doc: "each agent an OS process, paused by SIGSTOP, killed by SIGKILL", Real: true,
		Needs: Needs{Processes: true}, Plays: slices.Concat([]spec.Fault{spec.FaultCrash}, spec.MemberFaults)}, // RunsOn, Stores: the shared ones (init)

	{Kind: Contenders, Name: string(history.Naive), Doc: "the lab's lease, written to as most code does: the holder checks its own deadline",
		Library: Lab, Discipline: history.DisciplineNaive, Shared: true, RunsOn: []string{Sim, Memory, Etcd, Redis, Postgres}},
	{Kind: Contenders, Name: string(history.Fenced), Doc: "the lab's lease, written through the resource's gate with its fence",
		Library: Lab, Fence: true, Discipline: history.DisciplineFenced, Shared: true, Needs: Needs{Fence: true}, RunsOn: []string{Sim, Memory, Etcd, Redis, Postgres}},
	{Kind: Contenders, Name: EtcdMutex, Doc: "etcd's concurrency.Mutex on a Session, on an embedded etcd of its own, written to as most code does: " +
		"the holder checks its session's deadline; generations are the lock key's create revisions",
		Library: etcdClient + "/concurrency", Version: ModuleVersion(etcdClient), Discipline: history.DisciplineNaive, NotExpressible: etcdMutexNA,
		Needs: Needs{Server: "etcd"}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: libraryRefuses},
	{Kind: Contenders, Name: EtcdMutexFenced, Doc: "the same Mutex, written through the resource's gate with the lock key's create revision as the fence: " +
		"etcd's locks cannot by themselves guarantee mutual exclusion (Jepsen, etcd 3.4.3), a fence checked at the resource is the remedy",
		Library: etcdClient + "/concurrency", Version: ModuleVersion(etcdClient), Fence: true, Discipline: history.DisciplineFenced, NotExpressible: etcdMutexNA,
		Needs: Needs{Server: "etcd", Fence: true}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: libraryRefuses},
	{Kind: Contenders, Name: Redsync, Doc: "go-redsync/redsync's Mutex on one Redis, written to as most code does: " +
		"on --backend redis the backend's own (its Sentinel topology too, whose failovers strike it), else a redis-server of its own; " +
		"the holder checks Until(); generations in the order the lab saw the grants",
		Library: "github.com/go-redsync/redsync/v4", Version: ModuleVersion("github.com/go-redsync/redsync/v4"), Discipline: history.DisciplineNaive,
		Needs: Needs{Server: "redis-server"}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: besideRedisRefuses},
	{Kind: Contenders, Name: Redislock, Doc: "bsm/redislock on one Redis, written to as most code does: " +
		"on --backend redis the backend's own (its Sentinel topology too, whose failovers strike it), else a redis-server of its own; " +
		"the holder checks the TTL it asked for; generations in the order the lab saw the grants",
		Library: "github.com/bsm/redislock", Version: ModuleVersion("github.com/bsm/redislock"), Discipline: history.DisciplineNaive,
		Needs: Needs{Server: "redis-server"}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: besideRedisRefuses},
	{Kind: Contenders, Name: Redlock, Doc: "go-redsync/redsync's Redlock: one Mutex over 3 independent redis-servers of its own, held on a majority, written to as most code does: " +
		"the holder checks Until(); a scenario's restarts restart the first server (redis-1), the other two stay healthy; generations in the order the lab saw the grants",
		Library: "github.com/go-redsync/redsync/v4", Version: ModuleVersion("github.com/go-redsync/redsync/v4"), Discipline: history.DisciplineNaive,
		Needs: Needs{Server: "3 redis-servers"}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: restartableRefuses},
	{Kind: Contenders, Name: ZooKeeper, Doc: "go-zookeeper/zk's Lock (ZooKeeper's lock recipe) on a throwaway ZooKeeper of its own (or the one $LEASEFENCE_ZK_ADDR names), a session per Acquire whose timeout is the TTL, written to as most code does: " +
		"the holder believes while its lock znode is its session's; a holder's process paused past the timeout loses its session and its znode; generations are the lock znodes' czxids",
		Library: zkClient, Version: ModuleVersion(zkClient), Discipline: history.DisciplineNaive,
		Needs: Needs{Server: "zookeeper"}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: libraryRefuses},
	{Kind: Contenders, Name: ZooKeeperFenced, Doc: "the same Lock, written through the resource's gate with the lock znode's czxid as the fence: " +
		"a lock recipe cannot stop a holder that lost its session from writing (CURATOR-206), a fence checked at the resource is the remedy",
		Library: zkClient, Version: ModuleVersion(zkClient), Fence: true, Discipline: history.DisciplineFenced,
		Needs: Needs{Server: "zookeeper", Fence: true}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: libraryRefuses},
	{Kind: Contenders, Name: PgAdvisory, Doc: "PostgreSQL's session-level pg_try_advisory_lock on a connection taken from a pooled *sql.DB (pgx's stdlib), on the PostgreSQL $LEASEFENCE_PG_URL names, written to as most code does: " +
		"the lock has no TTL and the holder believes until it unlocks; a scenario's restarts end the lock's sessions (pg_terminate_backend), which drops the locks without a word to their holders; generations in the order the lab saw the grants",
		Library: pgx + "/stdlib", Version: ModuleVersion(pgx), Discipline: history.DisciplineNaive,
		Needs: Needs{Server: "postgresql"}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: restartableRefuses},
	{Kind: Contenders, Name: K8sLeaderElection, Doc: "client-go's LeaderElector, its Lease object in an embedded etcd of its own kept as kube-apiserver keeps it (resourceVersion the mod revision, updates compare-and-swap on it), written to as controllers do: " +
		"the holder leads from OnStartedLeading to OnStoppedLeading; a holder's process paused past the lease duration still leads when it wakes; generations are the revisions that acquired the Lease; " +
		"its adapter is built apart (realtime/k8slease/lab.sh)",
		Library: k8sElection, Version: K8sClientVersion, Discipline: history.DisciplineNaive, Apart: k8sApart,
		Needs: Needs{Server: "etcd"}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: libraryRefuses},
	{Kind: Contenders, Name: K8sLeaderElectionFenced, Doc: "the same elector, written through the resource's gate with the revision that acquired the Lease (fixed for the leadership term) as the fence: " +
		"client-go's leader election \"does not guarantee that only one client is acting as a leader (a.k.a. fencing)\", a fence checked at the resource is the remedy",
		Library: k8sElection, Version: K8sClientVersion, Fence: true, Discipline: history.DisciplineFenced, Apart: k8sApart,
		Needs: Needs{Server: "etcd", Fence: true}, Shared: true, RunsOn: []string{Memory, Etcd, Redis}, Refuses: libraryRefuses},
}

// Agents as processes run on the backends and with the stores that every
// process of a run can reach: the table's Shared entries.
func init() {
	d := Must(Drivers, Process)
	d.RunsOn, d.Stores = sharedNames(Backends), sharedNames(Stores)
}

func sharedNames(k *Kind) []string {
	var out []string
	for _, e := range All(k) {
		if e.Shared {
			out = append(out, e.Name)
		}
	}
	return out
}

// Shares reports why driver d's agents, each a process, cannot share e
// (a backend, a store or a contender), or nil: a driver that runs its
// agents as processes needs e to be Shared, the same to every process of
// the run.
func (d *Entry) Shares(e *Entry) error {
	if !d.Needs.Processes || e.Shared {
		return nil
	}
	err := fmt.Errorf("%s %s cannot be shared by agents as processes: it lives in one process", e.Kind.Name, e.Name)
	if names := sharedNames(e.Kind); len(names) > 0 {
		err = fmt.Errorf("%w; use %s %s", err, e.Kind.Flag, OneOfNames(names))
	}
	return err
}

// lockRefuses are what every lock that is not the lab's own refuses, a
// library's contender or a user's lock under labtest (CheckLock): a
// drift of the lab coordinator's clock, which the lock, keeping its own
// time on its own server, never runs on, and the lab coordinator's
// lock-delay, which the lock does not have.
var lockRefuses = []*Feature{CoordinatorDrift, LockDelay}

// libraryRefuses are the faults a library contender cannot play: they
// are faults of the lab's own coordinator (a restart, a push of its
// fences, a drift of its clock, its etcd members', its Redis primary's),
// and the library's lock is on a server of its own.
var libraryRefuses = slices.Concat([]*Feature{Restarts, Push}, lockRefuses, MemberFaults, PrimaryFaults)

// besideRedisRefuses are those but the faults of the Redis primary: on
// the Redis backend, a contender on one Redis (redsync, redislock) runs
// on the backend's own (realtime.ContenderBeside), its Sentinel topology
// included, so the primary's faults strike its lock as they strike the
// lab's.
var besideRedisRefuses = slices.Concat([]*Feature{Restarts, Push}, lockRefuses, MemberFaults)

// restartableRefuses are libraryRefuses but restarts: a scenario's
// restarts strike the contender's own server, the fault it is run for
// (redlock restarts one of its servers, redis-1, the fault its quorum is
// for; pg-advisory has the server end its lock's sessions).
var restartableRefuses = slices.Concat([]*Feature{Push}, lockRefuses, MemberFaults, PrimaryFaults)

// ModuleVersion is the version of module path linked into this program,
// as its build information says it ("" if it is not linked, or the
// program has none).
func ModuleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return ""
}

// StoreFor is the store a run on backend uses when resource ("" for
// none) names none: the store beside the backend's leases when the
// backend has one (etcd on etcd, redis on redis), else the default.
func StoreFor(backend, resource string) string {
	if resource != "" {
		return resource
	}
	if st, ok := Lookup(Stores, backend); ok && len(st.RunsOn) > 0 {
		return st.Name
	}
	return Default(Stores).Name
}

// Default is k's default entry: the first.
func Default(k *Kind) *Entry { return All(k)[0] }

// RunsOnBackend reports why e cannot run on backend b, or nil: e's
// RunsOn names the backends it needs (nil: any).
func (e *Entry) RunsOnBackend(b string) error {
	if len(e.RunsOn) == 0 || slices.Contains(e.RunsOn, b) {
		return nil
	}
	return fmt.Errorf("%s %s needs %s %s, got %q", e.Kind.Name, e.Name, Backends.Key, OneOfNames(e.RunsOn), b)
}

// WorksWith reports why driver e cannot keep its gates in store s, or
// nil: e's Stores names the stores it works with (nil: any).
func (e *Entry) WorksWith(s string) error {
	if len(e.Stores) == 0 || slices.Contains(e.Stores, s) {
		return nil
	}
	return fmt.Errorf("%s %s needs %s %s, got %q", e.Kind.Name, e.Name, Stores.Key, OneOfNames(e.Stores), s)
}

// CanPlayAll is the first refusal of sc by any of entries, or nil.
func CanPlayAll(sc spec.Scenario, entries ...*Entry) error {
	for _, e := range entries {
		if err := e.CanPlay(sc); err != nil {
			return err
		}
	}
	return nil
}

// OneOfNames spells names as a choice: "etcd", "etcd or redis", "sqlite,
// etcd or redis".
func OneOfNames(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Modes lists the contenders a run runs by default, in the order reports
// show them: the lab's own two, naive and fenced (Library Lab).
func Modes() []history.Mode {
	var out []history.Mode
	for _, e := range All(Contenders) {
		if e.Library == Lab {
			out = append(out, history.Mode(e.Name))
		}
	}
	return out
}

// ParseModes reads a choice among the lab's own contenders (Modes): one's name, or "both"
// (or "") for every one. The slice is the caller's own.
func ParseModes(s string) ([]history.Mode, error) {
	if s == "both" || s == "" {
		return Modes(), nil
	}
	modes := Modes()
	if slices.Contains(modes, history.Mode(s)) {
		return []history.Mode{history.Mode(s)}, nil
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return nil, fmt.Errorf("%w: mode must be %s or both, got %q", spec.ErrInvalidScenario, strings.Join(names, ", "), s)
}

// Where names the backends that can play sc: the simulator when it can,
// and each real backend with at least one store and one driver that run
// on it and play sc too.
func Where(sc spec.Scenario) []string {
	var out []string
	for _, b := range All(Backends) {
		if b.CanPlay(sc) != nil {
			continue
		}
		if !b.Real || (anyPlays(Stores, b.Name, sc) && anyPlays(Drivers, b.Name, sc)) {
			out = append(out, b.Name)
		}
	}
	return out
}

func anyPlays(k *Kind, backend string, sc spec.Scenario) bool {
	for _, e := range All(k) {
		if e.RunsOnBackend(backend) == nil && e.CanPlay(sc) == nil {
			return true
		}
	}
	return false
}

// Contender is contender e as a history header describes it.
func (e *Entry) Contender() history.Contender {
	return history.Contender{Name: history.Mode(e.Name), Library: e.Library, Version: e.Version, Fence: e.Fence,
		Discipline: e.Discipline, NotExpressible: e.NotExpressible}
}

// Describe is what a history header says of modes: the contender of each
// that is not one of the lab's own two, which a header need not describe
// (history.Header.Contender); nil when there is none, so that a history of
// naive and fenced reads as it always has. A mode the table lacks is left
// out, for the header's validation to refuse.
func Describe(modes []history.Mode) []history.Contender {
	var out []history.Contender
	var own history.Header
	for _, m := range modes {
		e, ok := Lookup(Contenders, string(m))
		if ok && own.Contender(m).Discipline == "" {
			out = append(out, e.Contender())
		}
	}
	return out
}

// Header is the history header of a run of sc in modes: the scenario's,
// with the modes' contenders described (Describe).
func Header(sc spec.Scenario, modes []history.Mode) history.Header {
	h := sc.Header(modes)
	h.Contenders = Describe(modes)
	return h
}
