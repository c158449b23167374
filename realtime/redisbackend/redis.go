package redisbackend

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// RedisOptions says which Redis a run uses.
type RedisOptions struct {
	// URL of an existing server (redis://host:port/db). Empty: a
	// throwaway redis-server the backend starts on loopback, in a
	// temporary directory.
	URL string
	// Dir is where the throwaway server's temporary directory is made
	// ("" for the system's temporary directory).
	Dir string
	// Topology is RedisSingle ("" too) or RedisSentinel: a primary,
	// RedisReplicas replicas and three Sentinels, reached through the
	// Sentinels.
	Topology string
	// Replication and Watermark are the fenced mode's redislease safety
	// options: WAIT after each fence minted and floor raised, and one
	// Watermark shared by its coordinator and its gates.
	Replication redislease.Replication
	Watermark   bool
	// Dialer, if set, makes the connections to URL's server in place of
	// go-redis's TCP dialer (redis.Options.Dialer): an in-memory
	// connection to a server in the same process, as a run in a
	// testing/synctest bubble needs, whose clock a real socket would stop.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Redis is the backend of leases on one Redis: in fenced mode
// redislease's Coordinator, in naive mode the classic SET NX PX lock
// (redisLock), each mode under a key prefix of its own inside a prefix
// fresh to the run. Restarts stop the throwaway server and start it again
// on its append-only file (persist), or crash it and start it on an empty
// directory: a Redis that kept nothing on disk, whose fence counter starts
// over.
//
// A restart waits for the calls in flight to end, and holds new ones until
// the server answers again. A call cut in half by the restart would be a
// write of unknown fate, which the lab cannot judge; what the restart does
// to the counter, the floors and the locks is what the run shows.
type Redis struct {
	opts   RedisOptions
	prefix string // the run's own: every key is under "{" + prefix

	// quiesce is held shared by every call the run makes to Redis, and
	// alone by a restart.
	quiesce sync.RWMutex
	cli     atomic.Pointer[redis.Client]
	server  *redisdeploy.Server     // a lone redis-server, AOF fsynced always; nil for a given URL
	deploy  *redisdeploy.Deployment // the sentinel topology; nil otherwise
	scratch string                  // the owner-marked directory the server's lives in, removed by Close
	// watermark is the fenced mode's memory of fences and floors, outside
	// Redis (RedisOptions.Watermark); nil remembers nothing.
	watermark *redislease.Watermark

	mu     sync.Mutex
	coords []*redisCoord
	losses []func(context.Context, *redis.Client) error // run before a restart that loses the data
	closed bool
	// attached: the run's keys are another process's (AttachRedis), and
	// stay when this backend closes.
	attached bool

	faultOnce sync.Once
	faulting  chan struct{} // faultTurn's
}

type redisCoord struct {
	prefix string
	clock  leasefence.Clock
	ttl    time.Duration
	delay  time.Duration // the lock-delay (OpenLockDelay), kept across restarts
	fenced bool          // the fenced mode's: with the backend's safety options
	cur    atomic.Pointer[leasefence.Service]
}

// NewRedis starts the throwaway server, or connects to opts.URL. Close
// stops and removes everything it started, and every key the run wrote.
func NewRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	var id [6]byte
	rand.Read(id[:])
	r := &Redis{opts: opts, prefix: fmt.Sprintf("leasefence-lab:run-%s-%s:", time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(id[:]))}
	if opts.Watermark {
		r.watermark = redislease.NewWatermark()
	}
	var cli *redis.Client
	switch {
	case opts.URL != "":
		ro, err := redis.ParseURL(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("realtime: redis: %w", err)
		}
		ro.Dialer = opts.Dialer
		cli = newRedisClient(ro)
	default:
		// The servers' directory lives in one marked with this process as
		// its owner, so a run killed before Close leaves nothing that the
		// next run does not remove.
		dir, err := scratch.MkdirTemp(opts.Dir, "leasefence-redis-run-")
		if err != nil {
			return nil, fmt.Errorf("realtime: redis: %w", err)
		}
		r.scratch = dir
		if opts.Topology == RedisSentinel {
			cli, err = r.startTopology(ctx, dir)
		} else {
			cli, err = r.startServer(ctx, dir)
		}
		if errors.Is(err, redisdeploy.ErrNotInstalled) {
			err = fmt.Errorf("realtime: %w (scripts/redis.sh start installs it), or pass --redis-url", err)
		}
		if err != nil {
			r.Close()
			return nil, err
		}
	}
	r.cli.Store(cli)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cli.Ping(pctx).Err(); err != nil {
		r.Close()
		return nil, fmt.Errorf("realtime: redis at %s: %w", r.Addr(), err)
	}
	return r, nil
}

// startServer starts the lone server in dir.
func (r *Redis) startServer(ctx context.Context, dir string) (*redis.Client, error) {
	s, err := redisdeploy.StartServer(ctx, redisdeploy.ServerOptions{Dir: dir})
	if err != nil {
		return nil, err
	}
	r.server = s
	return newRedisClient(&redis.Options{Addr: s.Addr()}), nil
}

// go-redis's failover client logs each switch of primary on its own (to
// stderr, across a dashboard); the run records the failovers itself.
var quietRedisLog sync.Once

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// startTopology starts the sentinel topology in dir, and a client that
// reaches its primary through the Sentinels. The Sentinels fail over a
// primary that has not answered for a second, and give a failover 2s.
func (r *Redis) startTopology(ctx context.Context, dir string) (*redis.Client, error) {
	d, err := redisdeploy.Start(ctx, redisdeploy.Options{Dir: dir, Replicas: RedisReplicas, FailoverTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	r.deploy = d
	quietRedisLog.Do(func() { redis.SetLogger(discardRedisLog{}) })
	o := d.FailoverOptions()
	o.ContextTimeoutEnabled = true
	return redis.NewFailoverClient(o), nil
}

// newRedisClient is a client that never resends a command on its own: a
// script or transaction whose reply was lost may have run, and sending it
// again would apply it twice behind the run's back.
func newRedisClient(o *redis.Options) *redis.Client {
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	return redis.NewClient(o)
}

// Name implements realtime.Backend.
func (*Redis) Name() string { return registry.Redis }

// Embedded reports whether the servers are the backend's own.
func (r *Redis) Embedded() bool { return r.server != nil || r.deploy != nil }

// Addr is the server's address; on the sentinel topology, the primary's
// as the Sentinels name it, or the failover client's label if none does.
func (r *Redis) Addr() string {
	if r.deploy != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if addr, err := r.deploy.PrimaryAddr(ctx); err == nil {
			return addr
		}
	}
	if cli := r.cli.Load(); cli != nil {
		return cli.Options().Addr
	}
	return ""
}

// Dir is the throwaway servers' temporary directory ("" for a given URL).
func (r *Redis) Dir() string {
	switch {
	case r.server != nil:
		return r.server.Dir()
	case r.deploy != nil:
		return r.deploy.Dir()
	}
	return ""
}

// Deployment is the sentinel topology (nil on one server): tests and the
// run's faults reach it.
func (r *Redis) Deployment() *redisdeploy.Deployment { return r.deploy }

// Prefix is the run's own key prefix: every key of the run begins with
// "{" + Prefix.
func (r *Redis) Prefix() string { return r.prefix }

// Client is the client of the server in use.
func (r *Redis) Client() *redis.Client { return r.cli.Load() }

// NewClient is a new client of the backend's Redis, as an application
// makes one: through the Sentinels on the sentinel topology, so that it
// follows a failover as the run's own client does, and to the server
// otherwise. bounded: each call is bounded by its context's deadline too
// (go-redis's ContextTimeoutEnabled). Closing it is the caller's.
func (r *Redis) NewClient(bounded bool) (*redis.Client, error) {
	switch {
	case r.deploy != nil:
		o := r.deploy.FailoverOptions()
		o.ContextTimeoutEnabled = bounded
		return redis.NewFailoverClient(o), nil
	case r.opts.URL != "":
		o, err := redis.ParseURL(r.opts.URL)
		if err != nil {
			return nil, fmt.Errorf("realtime: redis: %w", err)
		}
		o.ContextTimeoutEnabled, o.Dialer = bounded, r.opts.Dialer
		return redis.NewClient(o), nil
	}
	return redis.NewClient(&redis.Options{Addr: r.Addr(), ContextTimeoutEnabled: bounded}), nil
}

// Describe implements realtime.Describer: where the leases live, for a
// report.
func (r *Redis) Describe() string {
	var d string
	switch {
	case r.deploy != nil:
		d = fmt.Sprintf("redis (sentinel topology: a primary, %d replicas and %d Sentinels, AOF appendfsync always", len(r.deploy.Servers)-1, len(r.deploy.Sentinels))
	case r.server != nil:
		d = fmt.Sprintf("redis (throwaway redis-server on %s, AOF appendfsync always", r.Addr())
	default:
		d = fmt.Sprintf("redis (%s, keys under {%s…", r.Addr(), r.prefix)
	}
	if safety := r.safety(); safety != "" {
		d += "; fenced with " + safety
	}
	return d + ")"
}

// safety says which redislease safety options the fenced mode runs with
// ("" for none).
func (r *Redis) safety() string {
	var on []string
	if rp := r.opts.Replication; rp.Replicas > 0 {
		on = append(on, fmt.Sprintf("WAIT %d replicas, %v", rp.Replicas, rp.Timeout))
	}
	if r.watermark != nil {
		on = append(on, "watermark")
	}
	return strings.Join(on, " + ")
}

// modePrefix is the key prefix of one mode: coordinator, locks and gates
// share it, so each mode's keys are in one hash slot.
func (r *Redis) modePrefix(mode history.Mode) string { return r.prefix + string(mode) + ":" }

// do runs one call to Redis, shared with every other, never during a
// restart.
func (r *Redis) do(fn func(cli *redis.Client) error) error {
	r.quiesce.RLock()
	defer r.quiesce.RUnlock()
	return fn(r.cli.Load())
}

// Open implements realtime.Backend. ttl must be whole milliseconds.
func (r *Redis) Open(ctx context.Context, mode history.Mode, clock leasefence.Clock, ttl time.Duration) (func() leasefence.Service, error) {
	return r.OpenLockDelay(ctx, mode, clock, ttl, 0)
}

// OpenLockDelay implements realtime.LockDelayer:
// redislease.Options.LockDelay, whole milliseconds as Redis's PX. The
// classic lock the naive mode holds without one has no lock-delay, so with
// one the naive mode holds redislease's lease, as the simulator's and the
// in-memory backend's naive modes hold the lab's own, and writes to it as
// naively: the trade-off a lock-delay makes at a resource that cannot
// check a fence is the coordinator's, measured on its own lease.
func (r *Redis) OpenLockDelay(_ context.Context, mode history.Mode, clock leasefence.Clock, ttl, delay time.Duration) (func() leasefence.Service, error) {
	if ttl < time.Millisecond || ttl%time.Millisecond != 0 {
		return nil, fmt.Errorf("%w: ttl %v is not whole milliseconds, as Redis's PX is", realtime.ErrUnmappable, ttl)
	}
	if delay%time.Millisecond != 0 {
		return nil, fmt.Errorf("%w: lock_delay %v is not whole milliseconds, as Redis's PX is", realtime.ErrUnmappable, delay)
	}
	var own history.Header // the lab's own naive holds the classic lock; a library's contender brings its own
	fenced := own.Fenced(mode)
	if !fenced && delay == 0 {
		var svc leasefence.Service = quiesced{r: r, svc: newRedisLock(r.Client, r.modePrefix(mode), ttl, clock)}
		return func() leasefence.Service { return svc }, nil
	}
	rc := &redisCoord{prefix: r.modePrefix(mode), clock: clock, ttl: ttl, delay: delay, fenced: fenced}
	if err := r.connect(rc, r.cli.Load()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.coords = append(r.coords, rc)
	r.mu.Unlock()
	return func() leasefence.Service { return *rc.cur.Load() }, nil
}

// connect makes rc's coordinator on cli. (The naive mode's lock reads
// the client in use itself, and keeps its holders' values across a
// restart, as each holder would.)
func (r *Redis) connect(rc *redisCoord, cli *redis.Client) error {
	opts := redislease.Options{Prefix: rc.prefix, TTL: rc.ttl, LockDelay: rc.delay, Clock: rc.clock}
	if rc.fenced {
		opts.Replication, opts.Watermark = r.opts.Replication, r.watermark
	}
	c, err := redislease.New(cli, opts)
	if err != nil {
		return err
	}
	var svc leasefence.Service = quiesced{r: r, svc: c}
	rc.cur.Store(&svc)
	return nil
}

// ErrCannotRestartRedis is returned by Restart on a server the backend did
// not start.
var ErrCannotRestartRedis = errors.New("realtime: redis: only the lab's own redis-server can be restarted")

// Restart implements realtime.Backend: once no call is in flight, the server stops
// and starts again on its append-only file (persist), or is killed and
// starts on an empty directory. Before data is lost, each resource copies
// out its record of the writes that landed (the lab's witness, not the
// data: the data is lost).
func (r *Redis) Restart(ctx context.Context, persist bool) error {
	r.quiesce.Lock()
	defer r.quiesce.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server == nil || r.closed {
		return ErrCannotRestartRedis // a given URL, or the sentinel topology (its faults are failovers)
	}
	old := r.cli.Load()
	if !persist {
		for _, save := range r.losses {
			if err := save(ctx, old); err != nil {
				return fmt.Errorf("realtime: redis: keeping the record of writes before the restart: %w", err)
			}
		}
	}
	// Persisted, the server comes back on its append-only file (every
	// write fsynced before its reply, so a kill loses nothing answered);
	// otherwise on no data at all, as a server that kept nothing on disk.
	restart := r.server.RestartEmpty
	if persist {
		restart = r.server.Restart
	}
	if err := restart(ctx); err != nil {
		return err
	}
	// A new client: the old one's connections died with the server.
	cli := newRedisClient(&redis.Options{Addr: r.server.Addr()})
	r.cli.Store(cli)
	old.Close()
	for _, rc := range r.coords {
		if err := r.connect(rc, cli); err != nil {
			return err
		}
	}
	return nil
}

// RestartKeepsLeases implements realtime.LeaseKeeper: a restart on the
// append-only file brings every key back, each lease with its expiry (an
// absolute instant, so the time the server was down counts against it),
// the fence counters and the floors: the leases live on across it.
func (r *Redis) RestartKeepsLeases() (target string, kept bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server == nil {
		return "", false
	}
	return "redis-server " + r.server.Addr(), true
}

// beforeLoss registers save, run by a restart that loses the data, with no
// call in flight, on the client of the server about to lose it.
func (r *Redis) beforeLoss(save func(context.Context, *redis.Client) error) {
	r.mu.Lock()
	r.losses = append(r.losses, save)
	r.mu.Unlock()
}

// Close implements realtime.Backend: it deletes the run's keys from a given server,
// closes the client, stops the throwaway server and removes its directory.
// It is safe to call more than once.
func (r *Redis) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	if cli := r.cli.Load(); cli != nil {
		if !r.Embedded() && !r.attached {
			if err := deleteRedisPrefix(cli, "{"+r.prefix); err != nil {
				errs = append(errs, fmt.Errorf("realtime: redis: removing the run's keys under {%s: %w", r.prefix, err))
			}
		}
		cli.Close()
	}
	if r.server != nil {
		errs = append(errs, r.server.Close())
	}
	if r.deploy != nil {
		errs = append(errs, r.deploy.Close())
	}
	if r.scratch != "" {
		errs = append(errs, os.RemoveAll(r.scratch))
	}
	return errors.Join(errs...)
}

// deleteRedisPrefix deletes every key that begins with prefix (which holds
// no glob character).
func deleteRedisPrefix(cli *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := cli.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := cli.Del(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return errors.Join(iter.Err(), flush())
}

// quiesced is a service whose every call waits out a restart.
type quiesced struct {
	r   *Redis
	svc leasefence.Service
}

func (q quiesced) Acquire(ctx context.Context, req leasefence.AcquireRequest) (out leasefence.AcquireOutcome, err error) {
	err = q.r.do(func(*redis.Client) error { out, err = q.svc.Acquire(ctx, req); return err })
	return out, err
}

func (q quiesced) Renew(ctx context.Context, req leasefence.RenewRequest) (out leasefence.RenewOutcome, err error) {
	err = q.r.do(func(*redis.Client) error { out, err = q.svc.Renew(ctx, req); return err })
	return out, err
}

func (q quiesced) Release(ctx context.Context, t leasefence.Token) (out leasefence.ReleaseOutcome, err error) {
	err = q.r.do(func(*redis.Client) error { out, err = q.svc.Release(ctx, t); return err })
	return out, err
}

func init() {
	registry.SetOpener(registry.Backends, registry.Redis, registry.Settings{New: func() any { return new(Settings) },
		Example: "{topology: sentinel, wait_replicas: 2, wait_timeout: 200ms, watermark: true}", Check: checkSettings})
	registry.SetOpener(registry.Backends, registry.Redis, realtime.BackendAdapter{Check: check, Open: func(ctx context.Context, s *realtime.Setup, sc spec.Scenario) error {
		rs := SettingsOf(s.Config)
		r, err := NewRedis(ctx, RedisOptions{URL: rs.URL, Dir: s.Config.TempDir, Topology: rs.Topology,
			Replication: redislease.Replication{Replicas: rs.WaitReplicas, Timeout: rs.WaitTimeout}, Watermark: rs.Watermark})
		if err != nil {
			return err
		}
		s.Backend, s.Scale = r, cmp.Or(s.Config.TimeScale, 1)
		s.Scenario = realtime.Scale(sc, s.Scale)
		return nil
	}})
}
