package realtime

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/spec"
)

// The errors the fault layer answers instead of a reply. Each is "no
// answer" in the sense of leasefence.Service: the caller cannot tell
// whether the request took effect.
var (
	// ErrRequestDropped: the request was lost before it reached the
	// coordinator; the coordinator never saw it.
	ErrRequestDropped = errors.New("realtime: request dropped by the fault layer")
	// ErrReplyDropped: the coordinator answered and the answer was thrown
	// away; whatever the request did, it did.
	ErrReplyDropped = errors.New("realtime: reply dropped by the fault layer")
	// ErrPartitioned: the agent is cut off from the coordinator.
	ErrPartitioned = errors.New("realtime: agent partitioned from the coordinator")
)

// Call describes one request through the fault layer, for its observer.
type Call struct {
	Request   history.Request
	RequestID string
	Fence     leasefence.Fence // renew and release: the lease's fence
	// RequestDelay and ReplyDelay, when set, replace the network's draw
	// (a scripted action's own delays).
	RequestDelay, ReplyDelay *time.Duration
}

// Observer hears what the fault layer does to a call: RequestSent (with the
// request's delay), RequestDropped, RequestDuplicated (with the copy's
// delay) and ReplyDropped. It is called on the caller's goroutine.
type Observer func(c Call, kind history.Kind, d time.Duration)

// FaultStats counts what a fault layer did. Each counter counts calls.
type FaultStats struct {
	Calls           int64 `json:"calls"`
	RequestsDropped int64 `json:"requests_dropped"` // including those cut by a partition
	Partitioned     int64 `json:"partitioned"`
	Duplicated      int64 `json:"duplicated"`
	RepliesDropped  int64 `json:"replies_dropped"`
}

// Add returns the sum of s and o.
func (s FaultStats) Add(o FaultStats) FaultStats {
	return FaultStats{Calls: s.Calls + o.Calls, RequestsDropped: s.RequestsDropped + o.RequestsDropped,
		Partitioned: s.Partitioned + o.Partitioned, Duplicated: s.Duplicated + o.Duplicated,
		RepliesDropped: s.RepliesDropped + o.RepliesDropped}
}

// Faults is the network between one agent and its coordinator, as a layer
// around a leasefence.Service: it drops requests and replies, delays them
// (real sleeps), delivers requests twice, and cuts the agent off during a
// partition. Its choices come from a seeded generator, drawn in the same
// order for every call whatever happens to it, so the k-th call of an agent
// meets the same fate in every mode and every run of a seed; only when it
// happens is real.
//
// A dropped reply means the call reached the service and its answer was
// thrown away, so a retry tests the service's idempotency for real. A
// duplicate is delivered after the original, and its answer discarded.
//
// Faults implements leasefence.Service. Calls may come from several
// goroutines; each takes its choices under a lock, then runs unlocked.
type Faults struct {
	inner       func() leasefence.Service
	net         spec.Network
	partitioned func() bool
	observe     Observer

	mu       sync.Mutex
	rng      *rand.Rand
	dropReqs float64
	dropReps float64

	calls, reqDropped, partitions, duplicated, repDropped atomic.Int64
}

// NewFaults wraps the service inner returns (it is asked on every call, so
// that a restarted coordinator is reached) in the faults of net, seeded by
// seed and stream. partitioned and observe may be nil.
func NewFaults(inner func() leasefence.Service, net spec.Network, seed, stream uint64, partitioned func() bool, observe Observer) *Faults {
	if partitioned == nil {
		partitioned = func() bool { return false }
	}
	if observe == nil {
		observe = func(Call, history.Kind, time.Duration) {}
	}
	return &Faults{inner: inner, net: net, partitioned: partitioned, observe: observe,
		rng: rand.New(rand.NewPCG(seed^0x6a09e667f3bcc909, stream)), dropReqs: net.DropRequests, dropReps: net.DropReplies}
}

// SetDropRate sets both drop probabilities, for the calls that follow.
func (f *Faults) SetDropRate(p float64) {
	f.mu.Lock()
	f.dropReqs, f.dropReps = p, p
	f.mu.Unlock()
}

// Stats returns the counts so far.
func (f *Faults) Stats() FaultStats {
	return FaultStats{Calls: f.calls.Load(), RequestsDropped: f.reqDropped.Load(), Partitioned: f.partitions.Load(),
		Duplicated: f.duplicated.Load(), RepliesDropped: f.repDropped.Load()}
}

// fate is everything the fault layer decides about one call, up front.
type fate struct {
	dropRequest, duplicate, dropReply   bool
	requestDelay, copyDelay, replyDelay time.Duration
}

func (f *Faults) decide(c Call) fate {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rng
	x := fate{
		dropRequest:  r.Float64() < f.dropReqs,
		requestDelay: f.net.RequestDelay.Sample(r),
		duplicate:    r.Float64() < f.net.Duplicate,
		copyDelay:    f.net.RequestDelay.Sample(r),
		replyDelay:   f.net.ReplyDelay.Sample(r),
		dropReply:    r.Float64() < f.dropReps,
	}
	if c.RequestDelay != nil {
		x.requestDelay = *c.RequestDelay
	}
	if c.ReplyDelay != nil {
		x.replyDelay = *c.ReplyDelay
	}
	return x
}

// do runs one call through the faults.
func do[T any](ctx context.Context, f *Faults, c Call, call func(context.Context, leasefence.Service) (T, error)) (T, error) {
	var zero T
	if ctx == nil {
		return zero, leasefence.ErrInvalidRequest
	}
	x := f.decide(c)
	f.calls.Add(1)
	f.observe(c, history.RequestSent, x.requestDelay)
	if f.partitioned() {
		f.partitions.Add(1)
		f.reqDropped.Add(1)
		f.observe(c, history.RequestDropped, 0)
		return zero, ErrPartitioned
	}
	if x.dropRequest {
		f.reqDropped.Add(1)
		f.observe(c, history.RequestDropped, 0)
		return zero, ErrRequestDropped
	}
	if err := sleep(ctx, x.requestDelay); err != nil {
		return zero, err
	}
	svc := f.inner()
	out, err := call(ctx, svc)
	if x.duplicate {
		f.duplicated.Add(1)
		f.observe(c, history.RequestDuplicated, x.requestDelay+x.copyDelay)
		if sleep(ctx, x.copyDelay) == nil {
			call(ctx, svc) // the copy's answer goes nowhere, as a duplicate's would
		}
	}
	if err != nil {
		return zero, err
	}
	if err := sleep(ctx, x.replyDelay); err != nil {
		return zero, err
	}
	if f.partitioned() || x.dropReply {
		f.repDropped.Add(1)
		f.observe(c, history.ReplyDropped, 0)
		return zero, ErrReplyDropped
	}
	return out, nil
}

// Acquire implements leasefence.Service.
func (f *Faults) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	return f.AcquireCall(ctx, req, Call{Request: history.RequestAcquire, RequestID: req.RequestID})
}

// AcquireCall is Acquire described by c (a scripted action's delays).
func (f *Faults) AcquireCall(ctx context.Context, req leasefence.AcquireRequest, c Call) (leasefence.AcquireOutcome, error) {
	return do(ctx, f, c, func(ctx context.Context, s leasefence.Service) (leasefence.AcquireOutcome, error) {
		return s.Acquire(ctx, req)
	})
}

// Renew implements leasefence.Service.
func (f *Faults) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	return f.RenewCall(ctx, req, Call{Request: history.RequestRenew, RequestID: req.RequestID, Fence: req.Token.Fence})
}

// RenewCall is Renew described by c.
func (f *Faults) RenewCall(ctx context.Context, req leasefence.RenewRequest, c Call) (leasefence.RenewOutcome, error) {
	return do(ctx, f, c, func(ctx context.Context, s leasefence.Service) (leasefence.RenewOutcome, error) {
		return s.Renew(ctx, req)
	})
}

// Release implements leasefence.Service.
func (f *Faults) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	return do(ctx, f, Call{Request: history.RequestRelease, Fence: t.Fence},
		func(ctx context.Context, s leasefence.Service) (leasefence.ReleaseOutcome, error) {
			return s.Release(ctx, t)
		})
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
