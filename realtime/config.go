package realtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
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
// a backend setting's flag ("redis-topology", registry.SettingFlag),
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
	// Backend is registry.Memory or registry.Etcd.
	Backend string
	// Resource is where the gates live: registry.Memory, registry.SQLite or
	// registry.Etcd; "" means the backend's own (memory, or etcd on etcd).
	Resource string
	// EtcdMembers is the size of the embedded etcd cluster (0: 1).
	EtcdMembers int
	// EtcdEndpoints, if set, are an existing cluster to use instead.
	EtcdEndpoints []string
	// Settings are the settings only one backend reads, by backend name:
	// a pointer to the struct its adapter registers (registry.Settings),
	// read by that adapter alone. A backend's entry that is not Backend's
	// and sets any field is refused, naming the field's flag.
	Settings map[string]any
	// TimeScale stretches the scenario's times; 0 means 1 on memory, and
	// on etcd the smallest scale that makes the TTL whole seconds of at
	// least etcd's minimum (see WholeSecondScale).
	TimeScale float64
	// TempDir is where temporary directories are made ("" for the
	// system's).
	TempDir string
}

// Store is the store c names, or the backend's own (registry.StoreFor).
func (c Config) Store() string { return registry.StoreFor(c.Backend, c.Resource) }

// RealBackends names the backends the real-time runner runs on.
func RealBackends() []string {
	var out []string
	for _, e := range registry.All(registry.Backends) {
		if e.Real {
			out = append(out, e.Name)
		}
	}
	return out
}

// Check reports, before anything starts, why c cannot run sc: the first
// problem, as one line naming the setting, wrapping ErrBadConfig (and
// ErrUnmappable for a scenario etcd cannot play).
func (c Config) Check(sc spec.Scenario) error {
	bad := func(setting, format string, args ...any) error {
		return &ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	backend, ok := registry.Lookup(registry.Backends, c.Backend)
	if !ok || !backend.Real {
		return bad("backend", "must be %s, got %q", strings.Join(RealBackends(), ", "), c.Backend)
	}
	store, ok := registry.Lookup(registry.Stores, c.Store())
	if !ok {
		return bad("resource", "%v", registry.Choice(registry.Stores, c.Resource))
	}
	if err := store.RunsOnBackend(c.Backend); err != nil {
		return bad("resource", "%s keeps the %s: it needs backend %s", store.Name, store.Doc, strings.Join(store.RunsOn, " or "))
	}
	if err := store.CanPlay(sc); err != nil {
		return &ConfigError{Setting: "resource", Problem: err.Error(), Err: err}
	}
	if flag, backend := c.OtherSettings(); flag != "" {
		return bad(flag, "needs backend %s", backend)
	}
	if c.Backend != registry.Etcd && (c.EtcdMembers != 0 || len(c.EtcdEndpoints) > 0) { // flags only etcd has
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
	if err := backend.CanPlay(sc); err != nil {
		return &ConfigError{Setting: "scenario", Problem: err.Error(), Err: err}
	}
	adapter, ok := registry.Opener[BackendAdapter](registry.Backends, c.Backend)
	if !ok {
		return &ConfigError{Setting: "backend", Err: ErrNotLinked,
			Problem: fmt.Sprintf("this program links no adapter for backend %s (realtime/adapters links them all)", c.Backend)}
	}
	if _, ok := registry.Opener[StoreOpener](registry.Stores, c.Store()); !ok {
		return &ConfigError{Setting: "resource", Err: ErrNotLinked,
			Problem: fmt.Sprintf("this program links no adapter for resource %s (realtime/adapters links them all)", c.Store())}
	}
	if adapter.Check != nil {
		return adapter.Check(c, sc)
	}
	return nil
}

// CheckSettings reports the first setting of c whose value no run could
// take, whatever the backend c names and the scenario: each backend's
// settings are checked by the Check its adapter registers with them
// (registry.Settings), so that a program (the lab's flags) checks them
// knowing none. It returns a *ConfigError naming the setting's flag.
func CheckSettings(c Config) error {
	for _, name := range registry.WithSettings() {
		if se := registry.CheckSettings(name, c.Settings[name]); se != nil {
			return &ConfigError{Setting: registry.SettingFlag(name, se.Key), Problem: se.Problem}
		}
	}
	return nil
}

// OtherSettings names the first setting (as its flag, and its backend)
// that c sets for a backend other than c's own, or "" for none.
func (c Config) OtherSettings() (flag, backend string) {
	for _, name := range registry.WithSettings() {
		v, ok := c.Settings[name]
		if !ok || v == nil || name == c.Backend {
			continue
		}
		for _, f := range registry.SettingFields(name, v) {
			if !f.Value.IsZero() {
				return f.Flag, name
			}
		}
	}
	return "", ""
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
	// Contenders are the library contenders' locks, each on the server
	// it brought up (OpenContenders), by mode.
	Contenders map[history.Mode]*Contender

	once sync.Once
	err  error
}

// BackendOpener starts a backend for setup s and maps sc onto its time:
// it sets s.Backend, s.Scenario and s.Scale. A store of its own is open
// already (s.Store), so that the coordinator can sign with its key
// (Setup.Prover). A backend's adapter registers it, in its BackendAdapter,
// under its registry name (registry.SetOpener).
type BackendOpener func(ctx context.Context, s *Setup, sc spec.Scenario) error

// StoreOpener opens the store for setup s: before the backend for a store
// of its own, after it (s.Backend set) for one kept in the backend's
// server (its registry entry's RunsOn). A store's adapter registers its
// opener under its registry name (registry.SetOpener).
type StoreOpener func(s *Setup) (Store, error)

// ErrNotLinked: the registry names a backend or store whose adapter this
// program does not link (Config.Check says which; realtime/adapters links
// every one).
var ErrNotLinked = errors.New("realtime: no opener linked")

// Open checks c, starts the backend and the store, and maps sc onto them.
// Close stops and removes everything it started.
func Open(ctx context.Context, c Config, sc spec.Scenario) (*Setup, error) {
	if err := c.Check(sc); err != nil {
		return nil, err
	}
	adapter, _ := registry.Opener[BackendAdapter](registry.Backends, c.Backend) // Check found both
	openBackend := adapter.Open
	openStore, _ := registry.Opener[StoreOpener](registry.Stores, c.Store())
	s := &Setup{Config: c}
	beside := len(registry.Must(registry.Stores, c.Store()).RunsOn) > 0
	var err error
	if !beside {
		if s.Store, err = openStore(s); err != nil {
			return nil, err
		}
	}
	if err := openBackend(ctx, s, sc); err != nil {
		if s.Store != nil {
			s.Store.Close()
		}
		return nil, err
	}
	if beside {
		if s.Store, err = openStore(s); err != nil {
			s.Backend.Close()
			return nil, err
		}
	}
	return s, nil
}

// Prover is what signs the coordinator's grants: the store's when the
// store verifies proofs (ProvingStore), else nil.
func (s *Setup) Prover() leasefence.Prover {
	if p, ok := s.Store.(ProvingStore); ok {
		return p.Prover()
	}
	return nil
}

// Describe says where the run's leases live, for a report: "etcd
// (embedded, 3 members, min ttl 1s)".
func (s *Setup) Describe() string {
	if d, ok := s.Backend.(Describer); ok {
		return d.Describe()
	}
	return s.Backend.Name()
}

// Close stops the store and the backend and removes their temporary
// directories. It is safe to call more than once.
func (s *Setup) Close() error {
	s.once.Do(func() {
		errs := []error{s.Store.Close(), s.Backend.Close()}
		for _, c := range s.Contenders {
			errs = append(errs, c.Close())
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// OpenContenders brings up the lock of each of modes that is a library
// contender (one the registry names with an opener, such as redsync or
// etcd-mutex), each on the server it needs (the backend's own, where the
// contender can share it: ContenderBeside), for the runs of the setup to
// run in that mode in place of the backend's coordinator; the lab's own
// modes stay on the backend. Their servers' directories go under the
// setup's Config.TempDir. Close stops them. On an error it stops those it
// started.
func (s *Setup) OpenContenders(ctx context.Context, modes []history.Mode) error {
	for _, m := range modes {
		if slices.Contains(registry.Modes(), m) {
			continue
		}
		c, err := s.openContender(ctx, m)
		if err != nil {
			return errors.Join(err, s.closeContenders())
		}
		if s.Contenders == nil {
			s.Contenders = make(map[history.Mode]*Contender)
		}
		s.Contenders[m] = c
	}
	return nil
}

// openContender brings up contender m: on the setup's backend where it
// can run there (ContenderBeside), else on a server of its own
// (ContenderOpener).
func (s *Setup) openContender(ctx context.Context, m history.Mode) (*Contender, error) {
	if beside, ok := registry.Opener[ContenderBeside](registry.Contenders, string(m)); ok && s.Backend != nil {
		c, ok, err := beside(ctx, s.Backend)
		if err != nil {
			return nil, fmt.Errorf("realtime: contender %s on backend %s: %w", m, s.Backend.Name(), err)
		}
		if ok {
			return c, nil
		}
	}
	open, ok := registry.Opener[ContenderOpener](registry.Contenders, string(m))
	if !ok {
		return nil, fmt.Errorf("%w: contender %s", ErrNotLinked, m)
	}
	c, err := open(ctx, s.Config.TempDir)
	if err != nil {
		return nil, fmt.Errorf("realtime: contender %s: %w", m, err)
	}
	return c, nil
}

func (s *Setup) closeContenders() error {
	var errs []error
	for _, c := range s.Contenders {
		errs = append(errs, c.Close())
	}
	s.Contenders = nil
	return errors.Join(errs...)
}

// RunOptions are a run's modes (default both) and the subscribers that
// receive its every event.
type RunOptions struct {
	Modes       []history.Mode
	Subscribers []history.Subscriber
}

// RunScenario runs sc on a setup opened for it, closed after, with opts'
// modes (their library contenders' servers brought up, OpenContenders)
// and subscribers: the whole real-time run in one call.
func RunScenario(ctx context.Context, c Config, sc spec.Scenario, opts RunOptions) (*Result, error) {
	return RunScenarioAs(ctx, registry.InProcess, c, sc, opts)
}

// NewRunner prepares a run of the setup's scenario in opts' modes, with
// its subscribers.
func (s *Setup) NewRunner(opts RunOptions) (*Runner, error) {
	return New(s.Scenario, Options{Modes: opts.Modes, Backend: s.Backend, Contenders: s.Contenders, Store: s.Store, Subscribers: opts.Subscribers})
}

// NewLive prepares a run of the setup's scenario for a dashboard.
func (s *Setup) NewLive(modes []history.Mode) (*Live, error) {
	return NewLive(s.Scenario, Options{Modes: modes, Backend: s.Backend, Contenders: s.Contenders, Store: s.Store})
}

// Run runs the setup's scenario once: NewRunner, then Runner.Run.
func (s *Setup) Run(ctx context.Context, opts RunOptions) (*Result, error) {
	r, err := s.NewRunner(opts)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx)
}
