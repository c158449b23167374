package realtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// The backends and stores by name, as lab's --backend and --resource
// spell them.
const (
	BackendMemory = "memory"
	BackendEtcd   = "etcd"
	BackendRedis  = "redis"
	StoreMemory   = "memory"
	StoreSQLite   = "sqlite"
	StoreEtcd     = "etcd"
	StoreHTTP     = "http"
	StoreRedis    = "redis"
)

// MaxEtcdMembers is the largest embedded cluster: etcd's own advice is at
// most seven members.
const MaxEtcdMembers = spec.MaxEtcdMembers

// CheckEndpoint reports whether ep is an etcd client URL.
func CheckEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q must be a URL such as http://127.0.0.1:2379", ep)
	}
	return nil
}

// ErrBadConfig is matched by every error Config.Check returns.
var ErrBadConfig = errors.New("bad real-time configuration")

// ConfigError names the setting of a Config that cannot run the scenario:
// "backend", "resource", "etcd-members", "etcd-endpoints", "time-scale",
// or "scenario" for what the backend cannot play.
type ConfigError struct {
	Setting string
	Problem string
	Err     error // a further cause (ErrUnmappable), or nil
}

func (e *ConfigError) Error() string { return e.Setting + ": " + e.Problem }

// Is reports whether target is ErrBadConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrBadConfig }

func (e *ConfigError) Unwrap() error { return e.Err }

// Config names where a real-time run's leases and writes live.
type Config struct {
	// Backend is BackendMemory or BackendEtcd.
	Backend string
	// Resource is where the gates live: StoreMemory, StoreSQLite or
	// StoreEtcd; "" means the backend's own (memory, or etcd on etcd).
	Resource string
	// EtcdMembers is the size of the embedded etcd cluster (0: 1).
	EtcdMembers int
	// EtcdEndpoints, if set, are an existing cluster to use instead.
	EtcdEndpoints []string
	// RedisURL, if set, is an existing Redis to use instead of a
	// throwaway redis-server (BackendRedis).
	RedisURL string
	// TimeScale stretches the scenario's times; 0 means 1 on memory, and
	// on etcd the smallest scale that makes the TTL whole seconds of at
	// least etcd's minimum (see WholeSecondScale).
	TimeScale float64
	// TempDir is where temporary directories are made ("" for the
	// system's).
	TempDir string
}

func (c Config) store() string {
	if c.Resource == "" && (c.Backend == BackendEtcd || c.Backend == BackendRedis) {
		return c.Backend // the gates beside the leases: etcd on etcd, redis on redis
	}
	if c.Resource == "" {
		return StoreMemory
	}
	return c.Resource
}

// Check reports, before anything starts, why c cannot run sc: the first
// problem, as one line naming the setting, wrapping ErrBadConfig (and
// ErrUnmappable for a scenario etcd cannot play).
func (c Config) Check(sc spec.Scenario) error {
	bad := func(setting, format string, args ...any) error {
		return &ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	switch c.Backend {
	case BackendMemory, BackendEtcd, BackendRedis:
	default:
		return bad("backend", "must be %s, %s or %s, got %q", BackendMemory, BackendEtcd, BackendRedis, c.Backend)
	}
	switch c.store() {
	case StoreMemory, StoreSQLite, StoreHTTP:
	case StoreEtcd:
		if c.Backend != BackendEtcd {
			return bad("resource", "etcd keeps the gates in the backend's etcd: it needs backend etcd")
		}
	case StoreRedis:
	default:
		return bad("resource", "must be memory, sqlite, etcd, http or redis, got %q", c.Resource)
	}
	if c.store() != StoreHTTP && sc.OverTheWire() {
		return bad("resource", "the scenario has forgers or a network.write_delay, which only a resource across a network plays: use --resource http")
	}
	if err := c.checkRedis(sc); err != nil {
		return err
	}
	if c.Backend != BackendEtcd && (c.EtcdMembers != 0 || len(c.EtcdEndpoints) > 0) {
		return bad("backend", "etcd members and endpoints need backend etcd")
	}
	if c.EtcdMembers != 0 && len(c.EtcdEndpoints) > 0 {
		return bad("etcd-members", "members are for the embedded cluster: give members or endpoints, not both")
	}
	if c.EtcdMembers < 0 || c.EtcdMembers > MaxEtcdMembers {
		return bad("etcd-members", "must be in [1, %d], got %d", MaxEtcdMembers, c.EtcdMembers)
	}
	for _, ep := range c.EtcdEndpoints {
		if err := CheckEndpoint(ep); err != nil {
			return bad("etcd-endpoints", "%v", err)
		}
	}
	if math.IsNaN(c.TimeScale) || c.TimeScale < 0 || c.TimeScale > MaxTimeScale {
		return bad("time-scale", "must be in (0, %d], got %v", MaxTimeScale, c.TimeScale)
	}
	if len(sc.Interventions) > 0 {
		return bad("scenario", "it has recorded interventions, which replay only in the simulator")
	}
	if err := c.checkMembers(sc); err != nil {
		return err
	}
	if c.Backend == BackendEtcd {
		if len(c.EtcdEndpoints) > 0 && len(sc.Restarts) > 0 {
			return bad("scenario", "it restarts the coordinator, and only an embedded etcd can be restarted: drop --etcd-endpoints or the restarts")
		}
		for _, r := range sc.Restarts {
			if !r.Persist && c.store() == StoreEtcd {
				return &ConfigError{Setting: "resource", Err: ErrFloorsLost,
					Problem: "a restart that loses the coordinator's state starts a fresh etcd, which would take the etcd gates' floors with it: use --resource memory or sqlite"}
			}
		}
		if sc.Clocks.CoordinatorDriftPPM != 0 {
			return &ConfigError{Setting: "scenario", Err: ErrUnmappable,
				Problem: fmt.Sprintf("etcd keeps its own time: clocks.coordinator_drift_ppm must be 0, got %v", sc.Clocks.CoordinatorDriftPPM)}
		}
		if c.TimeScale > 0 {
			if err := CheckWholeSecondScale(sc.TTL, 0, c.TimeScale); err != nil {
				return &ConfigError{Setting: "time-scale", Problem: strings.TrimPrefix(err.Error(), ErrUnmappable.Error()+": "), Err: ErrUnmappable}
			}
		} else if _, err := WholeSecondScale(sc.TTL, 0); err != nil {
			return &ConfigError{Setting: "scenario", Problem: strings.TrimPrefix(err.Error(), ErrUnmappable.Error()+": "), Err: ErrUnmappable}
		}
	}
	return nil
}

// Setup is an opened backend and store, with the scenario mapped onto
// their time.
type Setup struct {
	Config  Config
	Backend Backend
	Store   Store
	// Scenario is the scenario as the run plays it: stretched by Scale.
	Scenario spec.Scenario
	Scale    float64

	once sync.Once
	err  error
}

// Open checks c, starts the backend and the store, and maps sc onto them.
// Close stops and removes everything it started.
func Open(ctx context.Context, c Config, sc spec.Scenario) (*Setup, error) {
	if err := c.Check(sc); err != nil {
		return nil, err
	}
	s := &Setup{Config: c}
	// The store comes first on http: the coordinator signs with its key.
	var wire *HTTPStore
	if c.store() == StoreHTTP {
		var err error
		if wire, err = NewHTTPStore(HTTPOptions{}); err != nil {
			return nil, err
		}
		s.Store = wire
	}
	switch c.Backend {
	case BackendMemory:
		m := NewMemory()
		if wire != nil {
			m.Prover = wire.Signer()
		}
		s.Backend = m
		s.Scale = c.TimeScale
		if s.Scale == 0 {
			s.Scale = 1
		}
		s.Scenario = Scale(sc, s.Scale)
	case BackendRedis:
		r, err := NewRedis(ctx, RedisOptions{URL: c.RedisURL, Dir: c.TempDir})
		if err != nil {
			return nil, err
		}
		s.Backend, s.Scale = r, cmp.Or(c.TimeScale, 1)
		s.Scenario = Scale(sc, s.Scale)
	case BackendEtcd:
		opts := EtcdOptions{Endpoints: c.EtcdEndpoints, Members: c.clusterSize(sc), Dir: c.TempDir}
		if wire != nil {
			opts.Prover = wire.Signer()
		}
		e, err := NewEtcd(ctx, opts)
		if err != nil {
			if wire != nil {
				wire.Close()
			}
			return nil, err
		}
		s.Backend = e
		if s.Scenario, s.Scale, err = MapOntoEtcd(sc, e.MinTTL(), c.TimeScale); err != nil {
			e.Close()
			if wire != nil {
				wire.Close()
			}
			return nil, err
		}
	}
	switch c.store() {
	case StoreMemory:
		s.Store = MemoryStore{}
	case StoreSQLite:
		st, err := NewSQLiteStore(c.TempDir)
		if err != nil {
			s.Backend.Close()
			return nil, err
		}
		s.Store = st
	case StoreEtcd:
		s.Store = EtcdStore{E: s.Backend.(*Etcd)}
	case StoreRedis:
		s.Store = RedisStore{R: s.Backend.(*Redis)}
	}
	return s, nil
}

// Describe says where the run's leases live, for a report: "etcd
// (embedded, 3 members, min ttl 1s)".
func (s *Setup) Describe() string {
	b := s.Backend.Name()
	if r, ok := s.Backend.(*Redis); ok {
		return r.describe()
	}
	if e, ok := s.Backend.(*Etcd); ok {
		if e.Embedded() {
			b += fmt.Sprintf(" (embedded, %d member%s, min ttl %v)", e.opts.Members, map[bool]string{true: "s as processes behind proxies"}[e.opts.Members > 1], e.MinTTL())
		} else {
			b += fmt.Sprintf(" (%s, keys under %s, min ttl %v)", strings.Join(e.opts.Endpoints, ","), e.Prefix(), e.MinTTL())
		}
	}
	return b
}

// Close stops the store and the backend and removes their temporary
// directories. It is safe to call more than once.
func (s *Setup) Close() error {
	s.once.Do(func() { s.err = errors.Join(s.Store.Close(), s.Backend.Close()) })
	return s.err
}

// RunOptions are a run's modes (default both) and the subscribers that
// receive its every event.
type RunOptions struct {
	Modes       []history.Mode
	Subscribers []history.Subscriber
}

// RunScenario runs sc on a setup opened for it, closed after, with opts'
// modes and subscribers: the whole real-time run in one call.
func RunScenario(ctx context.Context, c Config, sc spec.Scenario, opts RunOptions) (*Result, error) {
	s, err := Open(ctx, c, sc)
	if err != nil {
		return nil, err
	}
	res, err := s.Run(ctx, opts)
	return res, errors.Join(err, s.Close())
}

// NewRunner prepares a run of the setup's scenario in opts' modes, with
// its subscribers.
func (s *Setup) NewRunner(opts RunOptions) (*Runner, error) {
	return New(s.Scenario, Options{Modes: opts.Modes, Backend: s.Backend, Store: s.Store, Subscribers: opts.Subscribers})
}

// NewLive prepares a run of the setup's scenario for a dashboard.
func (s *Setup) NewLive(modes []history.Mode) (*Live, error) {
	return NewLive(s.Scenario, Options{Modes: modes, Backend: s.Backend, Store: s.Store})
}

// Run runs the setup's scenario once: NewRunner, then Runner.Run.
func (s *Setup) Run(ctx context.Context, opts RunOptions) (*Result, error) {
	r, err := s.NewRunner(opts)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx)
}
