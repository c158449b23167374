package etcdbackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/etcdcluster"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// EtcdOptions says which etcd a run uses.
type EtcdOptions struct {
	// Endpoints of an existing cluster. Empty: an embedded cluster of
	// Members members on loopback, in a temporary directory.
	Endpoints []string
	// Members of the embedded cluster (default 1).
	Members int
	// Dir is where the embedded cluster's temporary directory is made
	// ("" for the system's temporary directory).
	Dir string
	// Prover, if set, gives every grant its proof (etcdlease.Options.Prover).
	Prover leasefence.Prover
}

// Etcd is the backend of etcdlease coordinators on one etcd cluster: one
// per mode, each under its own key prefix inside a prefix fresh to the
// run. Restarts stop and restart the embedded members on their data
// directories, or (without persist) move to a fresh cluster on a new
// directory, as a restore that loses the store would: revisions, and so
// fences, start over.
type Etcd struct {
	opts   EtcdOptions
	prefix string // the run's own key prefix
	dir    string // the embedded clusters' temporary directory, or ""

	mu      sync.Mutex
	cluster *etcdembed.Cluster
	procs   *etcdcluster.Cluster // instead of cluster, for more than one member
	cli     atomic.Pointer[clientv3.Client]
	coords  []*etcdCoord
	minTTL  time.Duration
	closed  bool
	fresh   int // fresh clusters started by lost restarts
	// attached: the run's keys are another process's (AttachEtcd), and
	// stay when this backend closes.
	attached bool
}

type etcdCoord struct {
	prefix string
	clock  leasefence.Clock
	ttl    time.Duration
	delay  time.Duration // the lock-delay (OpenLockDelay), kept across restarts
	cur    atomic.Pointer[etcdlease.Coordinator]
}

// options are ec's coordinator's.
func (ec *etcdCoord) options(p leasefence.Prover) etcdlease.Options {
	return etcdlease.Options{Prefix: ec.prefix, TTL: ec.ttl, LockDelay: ec.delay, Clock: ec.clock, Prover: p}
}

// NewEtcd starts the embedded cluster, or connects to opts.Endpoints, and
// learns the smallest lease TTL the cluster grants. Close stops and
// removes everything it started, and every key the run wrote.
func NewEtcd(ctx context.Context, opts EtcdOptions) (*Etcd, error) {
	if opts.Members == 0 {
		opts.Members = 1
	}
	if len(opts.Endpoints) > 0 && opts.Members != 1 {
		return nil, errors.New("realtime: etcd: members are for the embedded cluster, not for given endpoints")
	}
	if opts.Members < 1 || opts.Members > realtime.MaxEtcdMembers {
		return nil, fmt.Errorf("realtime: etcd: members must be in [1, %d], got %d", realtime.MaxEtcdMembers, opts.Members)
	}
	var id [6]byte
	rand.Read(id[:])
	e := &Etcd{opts: opts, prefix: fmt.Sprintf("/leasefence-lab/run-%s-%s/", time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(id[:]))}
	endpoints := opts.Endpoints
	if len(endpoints) == 0 {
		dir, err := scratch.MkdirTemp(opts.Dir, "leasefence-etcd-")
		if err != nil {
			return nil, fmt.Errorf("realtime: etcd: %w", err)
		}
		e.dir = dir
		eps, err := e.startCluster(ctx, dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("realtime: etcd: %w", err)
		}
		endpoints = eps
	}
	cli, err := e.newClient(endpoints)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("realtime: etcd: %w", err)
	}
	e.cli.Store(cli)
	if e.minTTL, err = e.probeMinTTL(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// startCluster starts an embedded cluster of the backend's size in dir,
// in this process for one member and as processes for more, and returns
// its client endpoints.
func (e *Etcd) startCluster(ctx context.Context, dir string) ([]string, error) {
	if e.opts.Members > 1 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		c, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: e.opts.Members, Dir: dir})
		if err != nil {
			return nil, err
		}
		e.procs = c
		return c.Endpoints(), nil
	}
	c, err := etcdembed.StartCluster(dir, e.opts.Members)
	if err != nil {
		return nil, err
	}
	e.cluster = c
	return c.Endpoints(), nil
}

// newClient is a client of the cluster's endpoints.
func (e *Etcd) newClient(endpoints []string) (*clientv3.Client, error) {
	if e.opts.Members > 1 && e.Embedded() {
		return processClient(endpoints)
	}
	return etcdembed.Client(endpoints...)
}

// probeMinTTL asks the cluster for a one-second lease: it grants its
// minimum TTL if that is longer.
func (e *Etcd) probeMinTTL(ctx context.Context) (time.Duration, error) {
	cli := e.cli.Load()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := cli.Grant(pctx, 1)
	if err != nil {
		return 0, fmt.Errorf("realtime: etcd at %v: %w", cli.Endpoints(), err)
	}
	cli.Revoke(pctx, g.ID)
	return time.Duration(g.TTL) * time.Second, nil
}

// Name implements realtime.Backend.
func (*Etcd) Name() string { return registry.Etcd }

// MinTTL is the smallest lease TTL the cluster grants.
func (e *Etcd) MinTTL() time.Duration { return e.minTTL }

// Embedded reports whether the cluster is the backend's own.
func (e *Etcd) Embedded() bool { return len(e.opts.Endpoints) == 0 }

// Cluster is the embedded cluster when it runs in this process (one
// member; nil for given endpoints, and for member processes: see
// Members): tests stop its members.
func (e *Etcd) Cluster() *etcdembed.Cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cluster
}

// Dir is the embedded clusters' temporary directory ("" for given
// endpoints).
func (e *Etcd) Dir() string { return e.dir }

// Prefix is the run's own key prefix: every key of the run is under it.
func (e *Etcd) Prefix() string { return e.prefix }

// Client is the client of the cluster in use.
func (e *Etcd) Client() *clientv3.Client { return e.cli.Load() }

func (e *Etcd) modePrefix(mode history.Mode) string {
	return e.prefix + "leasefence/" + string(mode) + "/"
}

// Open implements realtime.Backend. ttl must be whole seconds of at least MinTTL.
func (e *Etcd) Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	return e.OpenLockDelay(ctx, mode, clock, ttl, 0)
}

// OpenLockDelay implements realtime.LockDelayer: etcdlease.Options.LockDelay,
// which an etcd lease times, so delay must be whole seconds.
func (e *Etcd) OpenLockDelay(_ context.Context, mode history.Mode, clock leasefence.Clock, ttl, delay time.Duration) (func() leasefence.Service, error) {
	if ttl < e.minTTL || ttl%time.Second != 0 {
		return nil, fmt.Errorf("%w: ttl %v is not whole seconds of at least etcd's minimum %v", realtime.ErrUnmappable, ttl, e.minTTL)
	}
	if delay%time.Second != 0 {
		return nil, fmt.Errorf("%w: lock_delay %v is not whole seconds, as etcd times a lock-delay", realtime.ErrUnmappable, delay)
	}
	ec := &etcdCoord{prefix: e.modePrefix(mode), clock: clock, ttl: ttl, delay: delay}
	c, err := etcdlease.New(e.cli.Load(), ec.options(e.opts.Prover))
	if err != nil {
		return nil, err
	}
	ec.cur.Store(c)
	e.mu.Lock()
	e.coords = append(e.coords, ec)
	e.mu.Unlock()
	return func() leasefence.Service { return ec.cur.Load() }, nil
}

// ErrCannotRestart is returned by Restart on a cluster the backend did not
// start.
var ErrCannotRestart = errors.New("realtime: etcd: only an embedded cluster can be restarted")

// RestartKeepsLeases implements realtime.LeaseKeeper: a restart on the
// members' data brings every key and lease back (etcd grants each
// restored lease its TTL anew, so a lease lives no shorter for it), the
// fence counters and the floors: the leases live on across it.
func (e *Etcd) RestartKeepsLeases() (target string, kept bool) { return "etcd", true }

// Restart implements realtime.Backend: every member stops, and starts again on its
// data directory (persist), or a fresh cluster starts on a new directory.
func (e *Etcd) Restart(ctx context.Context, persist bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if (e.cluster == nil && e.procs == nil) || e.closed {
		return ErrCannotRestart
	}
	if persist && e.procs != nil {
		return e.procs.Restart(ctx)
	}
	if persist {
		e.cluster.Close()
		return e.cluster.Restart()
	}
	e.closeCluster()
	e.fresh++
	eps, err := e.startCluster(ctx, filepath.Join(e.dir, fmt.Sprintf("fresh-%d", e.fresh)))
	if err != nil {
		return err
	}
	cli, err := e.newClient(eps)
	if err != nil {
		return err
	}
	old := e.cli.Swap(cli)
	old.Close()
	for _, ec := range e.coords {
		co, err := etcdlease.New(cli, ec.options(e.opts.Prover))
		if err != nil {
			return err
		}
		ec.cur.Store(co)
	}
	return nil
}

// Close implements realtime.Backend: it deletes the run's keys from a given
// cluster, closes the client, stops the embedded members and removes
// their directory. It is safe to call more than once.
func (e *Etcd) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	if cli := e.cli.Load(); cli != nil {
		if !e.Embedded() && !e.attached {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := cli.Delete(ctx, e.prefix, clientv3.WithPrefix()); err != nil {
				errs = append(errs, fmt.Errorf("realtime: etcd: removing the run's keys under %s: %w", e.prefix, err))
			}
			cancel()
		}
		cli.Close()
	}
	e.closeCluster()
	if e.dir != "" {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// closeCluster stops the embedded cluster's members, of either kind.
func (e *Etcd) closeCluster() {
	if e.cluster != nil {
		e.cluster.Close()
	}
	if e.procs != nil {
		e.procs.Close()
	}
}

// EtcdStore keeps the resources in the backend's etcd: each behind an
// etcdlease.Gate, its data one key (outside the gate's prefix) that each
// write puts, in the gate's transaction (fenced) or on its own (naive).
type EtcdStore struct{ E *Etcd }

// Name implements realtime.Store.
func (EtcdStore) Name() string { return registry.Etcd }

// Resource implements realtime.Store.
func (s EtcdStore) Resource(_ context.Context, mode history.Mode, name string, now func() time.Duration) (realtime.Resource, error) {
	return &etcdResource{e: s.E, mode: mode, name: name, now: now, data: s.E.prefix + "data/" + string(mode) + "/" + name,
		writes: s.E.prefix + "writes/" + string(mode) + "/" + name + "/"}, nil
}

// Close implements realtime.Store; the backend owns the cluster.
func (EtcdStore) Close() error { return nil }

// etcdResource is a resource on etcd: its data key, and its record, a key
// per write put in the write's own transaction (etcd's revision orders
// them).
type etcdResource struct {
	e                  *Etcd
	mode               history.Mode
	name, data, writes string
	now                func() time.Duration
}

// gate is the resource's gate on the client in use.
func (r *etcdResource) gate() (*etcdlease.Gate, error) {
	return etcdlease.NewGate(r.e.cli.Load(), r.name, etcdlease.GateOptions{Prefix: r.e.modePrefix(r.mode)})
}

func (r *etcdResource) put(t leasefence.Token) clientv3.Op {
	return clientv3.OpPut(r.data, fmt.Sprintf("%s@%d", t.Holder, t.Fence))
}

// record is the write's key in the resource's record, stamped as the
// transaction is sent: etcd's revision, not the stamp, orders the record.
func (r *etcdResource) record(id uint64) clientv3.Op {
	return clientv3.OpPut(fmt.Sprintf("%s%020d", r.writes, id), strconv.FormatInt(int64(r.now()), 10))
}

func (r *etcdResource) Commit(ctx context.Context, t leasefence.Token, id uint64) error {
	g, err := r.gate()
	if err != nil {
		return err
	}
	return g.Commit(ctx, t, r.put(t), r.record(id))
}

func (r *etcdResource) Write(ctx context.Context, t leasefence.Token, id uint64) error {
	_, err := r.e.cli.Load().Txn(ctx).Then(r.put(t), r.record(id)).Commit()
	return err
}

// Landings reads the record back in etcd's revision order.
func (r *etcdResource) Landings(ctx context.Context) ([]realtime.Landing, error) {
	resp, err := r.e.cli.Load().Get(ctx, r.writes, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := make([]realtime.Landing, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), r.writes), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("realtime: a write key %q: %w", kv.Key, err)
		}
		at, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("realtime: a write stamp %q: %w", kv.Value, err)
		}
		out = append(out, realtime.Landing{ID: id, At: time.Duration(at)})
	}
	return out, nil
}

func (r *etcdResource) Admit(ctx context.Context, t leasefence.Token) error {
	g, err := r.gate()
	if err != nil {
		return err
	}
	return g.Admit(ctx, t)
}

func (r *etcdResource) Floor(ctx context.Context) (leasefence.Token, error) {
	g, err := r.gate()
	if err != nil {
		return leasefence.Token{}, err
	}
	return g.Floor(ctx)
}

func init() {
	registry.SetOpener(registry.Backends, registry.Etcd, realtime.BackendAdapter{Check: check, Open: open})
	registry.SetOpener(registry.Stores, registry.Etcd, realtime.StoreOpener(func(s *realtime.Setup) (realtime.Store, error) {
		return EtcdStore{E: s.Backend.(*Etcd)}, nil
	}))
}

// open starts the backend realtime.Open asks for.
func open(ctx context.Context, s *realtime.Setup, sc spec.Scenario) error {
	c := s.Config
	e, err := NewEtcd(ctx, EtcdOptions{Endpoints: c.EtcdEndpoints, Members: clusterSize(c, sc), Dir: c.TempDir, Prover: s.Prover()})
	if err != nil {
		return err
	}
	if s.Scenario, s.Scale, err = realtime.MapOntoEtcd(sc, e.MinTTL(), c.TimeScale); err != nil {
		e.Close()
		return err
	}
	s.Backend = e
	return nil
}

// check is realtime.Config.Check's part for etcd: the cluster's size and
// member faults, what only an embedded etcd plays, and the time etcd keeps.
func check(c realtime.Config, sc spec.Scenario) error {
	bad := func(setting, format string, args ...any) error {
		return &realtime.ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	if err := checkMembers(c, sc); err != nil {
		return err
	}
	if len(c.EtcdEndpoints) > 0 && len(sc.Restarts) > 0 {
		return bad("scenario", "it restarts the coordinator, and only an embedded etcd can be restarted: drop --etcd-endpoints or the restarts")
	}
	for _, r := range sc.Restarts {
		if !r.Persist && c.Store() == registry.Etcd {
			return &realtime.ConfigError{Setting: "resource", Err: realtime.ErrFloorsLost,
				Problem: "a restart that loses the coordinator's state starts a fresh etcd, which would take the etcd gates' floors with it: use --resource memory or sqlite"}
		}
	}
	if sc.Clocks.CoordinatorDriftPPM != 0 {
		return &realtime.ConfigError{Setting: "scenario", Err: realtime.ErrUnmappable,
			Problem: fmt.Sprintf("etcd keeps its own time: clocks.coordinator_drift_ppm must be 0, got %v", sc.Clocks.CoordinatorDriftPPM)}
	}
	unmappable := func(setting string, err error) error {
		return &realtime.ConfigError{Setting: setting, Problem: strings.TrimPrefix(err.Error(), realtime.ErrUnmappable.Error()+": "), Err: realtime.ErrUnmappable}
	}
	k := c.TimeScale
	if k > 0 {
		if err := realtime.CheckWholeSecondScale(sc.TTL, 0, k); err != nil {
			return unmappable("time-scale", err)
		}
	} else {
		var err error
		if k, err = realtime.WholeSecondScale(sc.TTL, 0); err != nil {
			return unmappable("scenario", err)
		}
	}
	if err := realtime.CheckEtcdLockDelay(sc.LockDelay, k); err != nil {
		return unmappable("scenario", err)
	}
	return nil
}

// Describe implements realtime.Describer: "etcd (embedded, 3 members as
// processes behind proxies, min ttl 1s)".
func (e *Etcd) Describe() string {
	if e.Embedded() {
		return e.Name() + fmt.Sprintf(" (embedded, %d member%s, min ttl %v)", e.opts.Members, map[bool]string{true: "s as processes behind proxies"}[e.opts.Members > 1], e.MinTTL())
	}
	return e.Name() + fmt.Sprintf(" (%s, keys under %s, min ttl %v)", strings.Join(e.opts.Endpoints, ","), e.Prefix(), e.MinTTL())
}

// CoarseRetryHints implements realtime.CoarseRetryHinter: etcd's retry
// hints are whole seconds.
func (*Etcd) CoarseRetryHints() bool { return true }

// CheckRestart implements realtime.RestartChecker: only an embedded etcd
// can be restarted.
func (e *Etcd) CheckRestart(bool) error {
	if !e.Embedded() {
		return errors.New("only an embedded etcd can be restarted")
	}
	return nil
}

// FloorsLostWithBackend implements realtime.FloorKeeper: the gates are
// etcd's keys, and a restart that loses etcd's state starts a fresh etcd.
func (EtcdStore) FloorsLostWithBackend() bool { return true }
