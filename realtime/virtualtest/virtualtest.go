// Package virtualtest runs the real-time runner in virtual time: the same
// Runner, agents, faults, resource records and checker as a real-time run
// (lab run --backend memory or redis), inside a testing/synctest bubble,
// where time advances only when every goroutine of the run waits, so a
// minute of a scenario takes a fraction of a second of wall time. Only the
// clock and the connections differ: Redis-based locks reach an in-memory
// miniredis through go-redis's Dialer, its TTLs on the bubble's clock.
//
// A run is made reproducible by the runner's timers (one queue, fired in
// the order of instant, agent and arming, each left to run until it waits
// before the next: realtime.Options.Settle), so that a seed gives one
// history on the in-memory locks; what a lock does on goroutines of its
// own within one virtual instant is the Go scheduler's.
//
// A lock that blocks the bubble in a way that is not durable (a sync.Mutex
// held across a sleep, a real socket) stops the bubble's clock, so the run
// would never end: a watchdog on the wall clock, outside the bubble, sees
// the run's timers stand still and abandons it (realtime.Runner.Abandon),
// naming the calls under way, the scenario and the seed, and keeping the
// history recorded until then. The bubble's goroutines stay blocked until
// the test binary exits.
//
// It is a test package: the lab's binary links none of it.
package virtualtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// Target is what a virtual run runs: its modes and their locks, opened
// inside the bubble.
type Target struct {
	// Name names the target in failures ("memory", "redis", a contender's).
	Name string
	// Open returns the run's options (Modes, Backend, Contenders, Store),
	// opening what they need inside the bubble; what it opens it closes
	// with t.Cleanup.
	Open func(t *testing.T, sc spec.Scenario) (realtime.Options, error)
	// Plays, if set, refuses a scenario the target cannot play in
	// virtual time (ErrUnplayable), before any bubble is made.
	Plays func(sc spec.Scenario) error
}

// ErrUnplayable is a Target's refusal of a scenario it cannot play in
// virtual time (a restart of a server it cannot restart).
var ErrUnplayable = errors.New("virtualtest: the target cannot play the scenario")

// Config configures Run. Its zero value is ready to use.
type Config struct {
	// Watchdog is how long the run's timers may stand still on the wall
	// clock before the run is taken for blocked and abandoned
	// (DefaultWatchdog for 0).
	Watchdog time.Duration
	// Grace is the runner's (realtime.Options.Grace), in virtual time.
	Grace time.Duration
	// Commands, if set, counts the commands sent to every miniredis the
	// run starts (Miniredis).
	Commands *Commands
}

// DefaultWatchdog is Config.Watchdog's default: far past the wall time of
// the busiest virtual instant of a built-in scenario (milliseconds), short
// beside a test binary's timeout.
const DefaultWatchdog = 5 * time.Second

// Outcome is what a virtual run gives.
type Outcome struct {
	// Result is the checker's verdict on the history (nil if the run did
	// not start).
	Result *realtime.Result
	Header history.Header
	// Events is the run's history, in order.
	Events []history.Event
	// Err is the run's error: realtime.Runner.Run's (a
	// *realtime.NeverReturnedError for a lock that never returned, Stalled
	// for one that stopped the bubble's clock), or what kept it from
	// starting.
	Err error
	// Wall is how long the run took on the wall clock.
	Wall time.Duration
}

// Digest is a digest of the history's events: two runs that recorded the
// same events at the same virtual instants have the same digest.
func (o *Outcome) Digest() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, e := range o.Events {
		enc.Encode(e)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// History is the run's history file, as lab run --events writes it.
func (o *Outcome) History() ([]byte, error) {
	var b bytes.Buffer
	enc, err := history.NewEncoder(&b, o.Header)
	if err != nil {
		return nil, err
	}
	for _, e := range o.Events {
		enc.Event(e)
	}
	// Flushed before the bytes are taken: they are the buffer's as it is.
	if err := enc.Flush(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// recorder keeps the history's events as the runner hands them over,
// inside the bubble or, for an abandoned run, outside it.
type recorder struct {
	mu     sync.Mutex
	events []history.Event
}

func (r *recorder) Event(e history.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []history.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]history.Event(nil), r.events...)
}

// Run runs sc on target in a testing/synctest bubble of its own, and
// returns its outcome; it fails t only if the bubble itself fails. A run
// whose clock stops is abandoned after cfg.Watchdog of wall time, and its
// goroutines are left blocked: a test that meets one should fail.
func Run(t *testing.T, sc spec.Scenario, target Target, cfg Config) *Outcome {
	t.Helper()
	if cfg.Watchdog <= 0 {
		cfg.Watchdog = DefaultWatchdog
	}
	if target.Plays != nil {
		if err := target.Plays(sc); err != nil {
			return &Outcome{Err: fmt.Errorf("virtualtest: %s: %w", target.Name, err)}
		}
	}
	var (
		runner atomic.Pointer[realtime.Runner]
		header atomic.Pointer[history.Header]
		rec    recorder
	)
	// Made outside the bubble: the bubble's goroutines only send on done
	// (buffered) and wait on forever, which nothing closes.
	done := make(chan *Outcome, 1)
	exited := make(chan struct{})
	forever := make(chan struct{})
	var ends atomic.Bool // the bubble's function returns, its run over
	start := time.Now()
	go func() {
		defer close(exited)
		defer leftBlocked()
		synctest.Test(t, func(t *testing.T) {
			o := runInBubble(t, sc, target, cfg, &rec, func(r *realtime.Runner) {
				h := r.Header()
				header.Store(&h)
				runner.Store(r)
			})
			stuck := errors.Is(o.Err, realtime.ErrNeverReturned)
			ends.Store(!stuck)
			done <- o
			if stuck {
				// A call still blocked in the lock: were this function to
				// return, the bubble would wait for it, or call it a
				// deadlock and end the test binary.
				<-forever
			}
		})
	}()
	o := watch(cfg.Watchdog, done, exited, &runner)
	if ends.Load() {
		// The test that called Run must not end before the bubble's own
		// test does (the testing package's records of it race). A
		// goroutine the lock left waiting on what is not the bubble's (a
		// real socket) keeps it from ending: bounded by the watchdog.
		select {
		case <-exited:
		case <-time.After(cfg.Watchdog):
		}
	}
	if o.Result != nil && o.Events == nil {
		o.Events = rec.all()
	}
	if h := header.Load(); h != nil {
		o.Header = *h
	}
	o.Wall = time.Since(start)
	return o
}

// leftBlocked recovers the bubble's deadlock once its function returned:
// a goroutine the lock started (a client's pool, a refresher) left
// blocked for good, which would end the test binary. The outcome is
// sent by then; the goroutine stays blocked until the binary exits.
func leftBlocked() {
	p := recover()
	if err, ok := p.(error); p != nil && (!ok || !strings.HasPrefix(err.Error(), "deadlock: main bubble goroutine has exited")) {
		panic(p)
	}
}

// runInBubble opens target and runs sc, inside the bubble.
func runInBubble(t *testing.T, sc spec.Scenario, target Target, cfg Config, rec *recorder, made func(*realtime.Runner)) *Outcome {
	if cfg.Commands != nil {
		counting.Store(t, cfg.Commands)
		defer counting.Delete(t)
	}
	opts, err := target.Open(t, sc)
	if err != nil {
		return &Outcome{Err: fmt.Errorf("virtualtest: %s: %w", target.Name, err)}
	}
	opts.Settle = synctest.Wait
	opts.Grace = cfg.Grace
	opts.Subscribers = append(opts.Subscribers, rec)
	r, err := realtime.New(sc, opts)
	if err != nil {
		return &Outcome{Err: fmt.Errorf("virtualtest: %s: %w", target.Name, err)}
	}
	made(r)
	res, err := r.Run(context.Background())
	return &Outcome{Result: res, Err: err}
}

// watch waits for the run's outcome on the wall clock, and abandons the
// run once its timers stood still for watchdog.
func watch(watchdog time.Duration, done <-chan *Outcome, exited <-chan struct{}, runner *atomic.Pointer[realtime.Runner]) *Outcome {
	tick := time.NewTicker(watchdog / 20)
	defer tick.Stop()
	var fired uint64
	moved := time.Now()
	for {
		select {
		case o := <-done:
			return o
		case <-exited:
			select {
			case o := <-done:
				return o
			default:
			}
			return &Outcome{Err: errors.New("virtualtest: the bubble ended without an outcome (the test failed inside it)")}
		case <-tick.C:
		}
		r := runner.Load()
		if r != nil && r.Fired() != fired {
			fired, moved = r.Fired(), time.Now()
			continue
		}
		if time.Since(moved) < watchdog {
			continue
		}
		if r == nil {
			return &Outcome{Err: fmt.Errorf("virtualtest: opening the run stood still for %s of wall time: a dial that never ends (a real socket?)", watchdog)}
		}
		res, err := r.Abandon()
		if errors.Is(err, realtime.ErrNotStalled) {
			continue // it ended meanwhile: its outcome is on its way
		}
		return &Outcome{Result: res, Err: err}
	}
}
