package redislease

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
)

// DefaultPrefix is the key prefix when Options.Prefix or GateOptions.Prefix
// is empty. Keys begin with it in braces: "{leasefence:}".
const DefaultPrefix = "leasefence:"

// DefaultReplayWindow is Options.ReplayWindow when 0.
const DefaultReplayWindow = 10 * time.Minute

// MaxFence is the highest fence this package issues or accepts: the
// largest integer below 2^53, which Lua's numbers (doubles) hold exactly.
const MaxFence leasefence.Fence = 1<<53 - 1

// Options configures a Coordinator.
type Options struct {
	// Prefix is the key prefix, default DefaultPrefix; it may not contain
	// braces. Coordinators (and gates) that share a prefix share leases and
	// one fence counter.
	Prefix string
	// TTL is the lease duration: whole milliseconds, >= 1ms. Grant.TTL
	// reports it unchanged.
	TTL time.Duration
	// Clock stamps Grant.CoordinatorExpiresAt, which is for logs only;
	// default a monotonic clock of domain "redis".
	Clock leasefence.Clock
	// MinFence: every fence issued is above it. This is how an operator
	// recovers after Redis lost its counter (a restart without AOF, a
	// failover): set it at or above the highest floor of any gate, and the
	// next acquire moves the counter past it. Below MaxFence.
	MinFence leasefence.Fence
	// ReplayWindow is how long an acquire's request id is remembered for
	// retries; 0 means DefaultReplayWindow, otherwise whole milliseconds,
	// >= 1ms. A retry after the window is a fresh acquisition, like a retry
	// evicted from the in-memory coordinator's replay cache.
	ReplayWindow time.Duration
	// Replication: WAIT for replicas after every fence minted; the zero
	// value waits for none. An Acquire whose grant too few replicas
	// acknowledged returns an error matching ErrNotReplicated.
	Replication Replication
	// Watermark: the process's memory of the fences it has seen, which no
	// Acquire mints at or below; nil remembers nothing.
	Watermark *Watermark
	// LockDelay: after a lease expires (never after a release), the
	// resource is refused to everyone, its last holder included, until
	// LockDelay has passed since the expiry, with the reason "lock-delay"
	// and a RetryAfter covering the rest: as
	// leasefence.CoordinatorOptions.LockDelay, and in Redis, so that every
	// coordinator on the prefix, and one that restarted, refuses alike.
	// Whole milliseconds; 0 (the default) is no delay; at most
	// leasefence.MaxLockDelay unless AllowLongLockDelay. See delayKey in
	// the scripts, and the package doc, for how it is kept.
	LockDelay time.Duration
	// AllowLongLockDelay accepts a LockDelay above leasefence.MaxLockDelay.
	AllowLongLockDelay bool
}

// Coordinator is a leasefence.Service on Redis. It is safe for concurrent
// use, and any number of Coordinators (in any number of processes) may share
// one Redis and prefix: every decision is one script in Redis.
type Coordinator struct {
	rdb      redis.UniversalClient
	keys     keys
	ttl      time.Duration
	clock    leasefence.Clock
	minFence leasefence.Fence
	window   time.Duration

	repl      Replication
	watermark *Watermark
	delayPX   string // the delay key's PX: TTL + LockDelay in ms, or "0" without a lock-delay
}

var _ leasefence.Service = (*Coordinator)(nil)

// New returns a coordinator on rdb, or an error wrapping
// leasefence.ErrInvalidRequest for a nil client or an option out of range.
// Nothing is sent to Redis until the first call.
func New(rdb redis.UniversalClient, opts Options) (*Coordinator, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("%w: redislease.New with a nil client", leasefence.ErrInvalidRequest)
	}
	if err := wholeMillis("Options.TTL", opts.TTL); err != nil {
		return nil, err
	}
	window := opts.ReplayWindow
	if window == 0 {
		window = DefaultReplayWindow
	}
	if err := wholeMillis("Options.ReplayWindow", window); err != nil {
		return nil, err
	}
	if err := leasefence.ValidateLockDelay("Options.LockDelay", opts.LockDelay, opts.AllowLongLockDelay); err != nil {
		return nil, err
	}
	delayPX := "0"
	if opts.LockDelay > 0 {
		if err := wholeMillis("Options.LockDelay", opts.LockDelay); err != nil {
			return nil, err
		}
		delayPX = millis(opts.TTL + opts.LockDelay)
	}
	if opts.MinFence >= MaxFence {
		return nil, fmt.Errorf("%w: Options.MinFence %d leaves no fence below MaxFence %d", leasefence.ErrInvalidRequest, opts.MinFence, MaxFence)
	}
	if err := opts.Replication.check("Options.Replication", rdb); err != nil {
		return nil, err
	}
	k, err := newKeys(opts.Prefix)
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = leasefence.NewMonotonicClock("redis")
	}
	return &Coordinator{rdb: rdb, keys: k, ttl: opts.TTL, clock: clock, minFence: opts.MinFence, window: window,
		repl: opts.Replication, watermark: opts.Watermark, delayPX: delayPX}, nil
}

func wholeMillis(name string, d time.Duration) error {
	if d < time.Millisecond || d%time.Millisecond != 0 {
		return fmt.Errorf("%w: %s must be whole milliseconds >= 1ms, got %v", leasefence.ErrInvalidRequest, name, d)
	}
	return nil
}

// isNil reports whether rdb is nil, or an interface holding a nil pointer
// (a nil *redis.Client), which would panic on first use.
func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// keys names the keys of one prefix, all in one hash slot.
type keys struct{ tag string } // "{<prefix>}"

func newKeys(prefix string) (keys, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return keys{}, fmt.Errorf("%w: prefix %q contains a brace; it is put in braces to make the hash tag", leasefence.ErrInvalidRequest, prefix)
	}
	return keys{tag: "{" + prefix + "}"}, nil
}

func (k keys) counter() string                  { return k.tag + "fence" }
func (k keys) holder(resource string) string    { return k.tag + "holder:" + resource }
func (k keys) last(resource string) string      { return k.tag + "last:" + resource }
func (k keys) delay(resource string) string     { return k.tag + "delay:" + resource }
func (k keys) request(id string) string         { return k.tag + "req:" + id }
func (k keys) gateFloor(resource string) string { return k.tag + "gate:" + resource + ":floor" }
func (k keys) gateLog(resource string) string   { return k.tag + "gate:" + resource + ":log" }

// reserved are the beginnings of every key above.
func (k keys) reserved() []string {
	return []string{k.counter(), k.tag + "holder:", k.tag + "last:", k.tag + "delay:", k.tag + "req:", k.tag + "gate:"}
}

func nilCtx(op string) error {
	return fmt.Errorf("%w: %s with a nil context", leasefence.ErrInvalidRequest, op)
}

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func fenceArg(f leasefence.Fence) string { return strconv.FormatUint(uint64(f), 10) }

// Acquire grants a lease on a free resource, in one script that also
// answers a retried request id and every refusal. The error is non-nil when
// no answer was had (Redis unreachable, ctx done) or the request is
// malformed (leasefence.ErrInvalidRequest). After an error the request may
// have been granted: resend it (same RequestID) to be answered with that
// grant.
func (c *Coordinator) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	if ctx == nil {
		return leasefence.AcquireOutcome{}, nilCtx("acquire")
	}
	if err := leasefence.ValidateAcquire(req); err != nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("acquire: %w", err)
	}
	seen := c.watermark.fence(c.keys.counter()) // before the script, as Watermark.floor says
	res, acked, err := c.runAcquire(ctx,
		[]string{c.keys.counter(), c.keys.holder(req.Resource), c.keys.last(req.Resource), c.keys.request(req.RequestID), c.keys.delay(req.Resource)},
		req.Holder, req.Resource, millis(c.ttl), fenceArg(max(c.minFence, seen)), millis(c.window), fenceArg(MaxFence), c.delayPX,
	)
	if err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	r := reply(res)
	switch r.str(0) {
	case "granted":
		if f, drawn := r.fence(1), r.int(2); r.err == nil {
			c.minted(seen, f, leasefence.Fence(drawn))
			if err := c.replicated(ctx, req, f, acked); err != nil {
				return leasefence.AcquireOutcome{}, err
			}
			return c.granted(req, f, c.ttl, c.ttl)
		}
	case "replay":
		f, ttl, left := r.fence(1), time.Duration(r.int(2))*time.Millisecond, time.Duration(r.int(3))*time.Millisecond
		if r.err == nil {
			c.watermark.sawFence(c.keys.counter(), f)
			if err := c.replicated(ctx, req, f, -1); err != nil {
				return leasefence.AcquireOutcome{}, err
			}
			return c.granted(req, f, ttl, left)
		}
	case "held":
		reason := leasefence.ReasonHeld
		if r.str(1) == req.Holder {
			reason = leasefence.ReasonAlreadyHeld
		}
		retry := max(time.Duration(r.int(2))*time.Millisecond, time.Millisecond)
		return leasefence.AcquireOutcome{Reason: reason, HeldBy: r.str(1), RetryAfter: retry}, r.err
	case "lock-delay":
		retry := max(time.Duration(r.int(1))*time.Millisecond, time.Millisecond)
		return leasefence.AcquireOutcome{Reason: leasefence.ReasonLockDelay, RetryAfter: retry}, r.err
	case "stale-request":
		return leasefence.AcquireOutcome{Reason: leasefence.ReasonStaleRequest}, nil
	case "request-conflict":
		return leasefence.AcquireOutcome{Reason: leasefence.ReasonRequestConflict}, nil
	case "exhausted":
		return leasefence.AcquireOutcome{}, fmt.Errorf("%w: the counter under %q passed MaxFence", leasefence.ErrFencesExhausted, c.keys.tag)
	}
	return leasefence.AcquireOutcome{}, r.unexpected("acquire")
}

// granted is the grant of fence to req, with the grant's own TTL and the
// time its key has left.
func (c *Coordinator) granted(req leasefence.AcquireRequest, fence leasefence.Fence, ttl, left time.Duration) (leasefence.AcquireOutcome, error) {
	now, err := c.clock.Now()
	if err != nil {
		return leasefence.AcquireOutcome{}, fmt.Errorf("redislease: coordinator clock: %w", err)
	}
	if ttl <= 0 {
		return leasefence.AcquireOutcome{}, fmt.Errorf("%w: request record %s holds TTL %v", ErrCorruptKey, c.keys.request(req.RequestID), ttl)
	}
	return leasefence.AcquireOutcome{OK: true, Grant: leasefence.Grant{
		RequestID:            req.RequestID,
		Token:                leasefence.Token{Resource: req.Resource, Holder: req.Holder, Fence: fence},
		TTL:                  ttl,
		CoordinatorExpiresAt: now.Add(max(left, 0)),
	}}, nil
}

// Renew extends t's lease to this coordinator's TTL from now, in one script
// that first checks that the holder key carries t's fence and holder: a
// stale token can never extend a newer holder's lease, and an expired key is
// gone, never resurrected. The grant keeps the fence.
func (c *Coordinator) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	if ctx == nil {
		return leasefence.RenewOutcome{}, nilCtx("renew")
	}
	t := req.Token
	if err := leasefence.ValidateRenew(req); err != nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("renew: %w", err)
	}
	if t.Fence > MaxFence {
		return leasefence.RenewOutcome{Reason: leasefence.ReasonUnknown}, ctx.Err()
	}
	reason, err := c.run(ctx, renewScript, t, millis(c.ttl), c.delayPX)
	if err != nil || reason != "" {
		return leasefence.RenewOutcome{Reason: reason}, err
	}
	now, err := c.clock.Now()
	if err != nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("redislease: coordinator clock: %w", err)
	}
	return leasefence.RenewOutcome{OK: true, Grant: leasefence.Grant{
		RequestID: req.RequestID, Token: t, TTL: c.ttl, CoordinatorExpiresAt: now.Add(c.ttl),
	}}, nil
}

// Release deletes t's holder key, in one script that first checks that it
// carries t's fence and holder (never the key name alone), and records the
// release. Anything else answers with the same reasons as Renew.
func (c *Coordinator) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	if ctx == nil {
		return leasefence.ReleaseOutcome{}, nilCtx("release")
	}
	if err := leasefence.ValidateToken(t); err != nil {
		return leasefence.ReleaseOutcome{}, fmt.Errorf("release: %w", err)
	}
	if t.Fence > MaxFence {
		return leasefence.ReleaseOutcome{Reason: leasefence.ReasonUnknown}, ctx.Err()
	}
	reason, err := c.run(ctx, releaseScript, t)
	return leasefence.ReleaseOutcome{OK: err == nil && reason == "", Reason: reason}, err
}

// run runs a renew or release script for t and returns "" if it acted, or
// the reason it did not.
func (c *Coordinator) run(ctx context.Context, s *redis.Script, t leasefence.Token, extra ...any) (leasefence.Reason, error) {
	args := append([]any{fenceArg(t.Fence), t.Holder}, extra...)
	res, err := s.Run(ctx, c.rdb, []string{c.keys.holder(t.Resource), c.keys.last(t.Resource), c.keys.delay(t.Resource)}, args...).Slice()
	if err != nil {
		return "", err
	}
	r := reply(res)
	switch got := r.str(0); got {
	case "ok":
		return "", r.err
	case "unknown", "superseded", "released", "expired":
		return leasefence.Reason(got), r.err
	}
	return "", r.unexpected("renew or release")
}
