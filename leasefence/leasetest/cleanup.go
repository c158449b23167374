package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// testHoldCleansUp runs Hold and TryHold into each error that comes after
// the service may have granted the lease, with the caller's ctx ended by
// then wherever it can be, and requires the lease to be free at once:
// another holder's acquire is granted, not refused as held for a TTL.
// Every clean-up call has to reach the service although ctx has ended.
func testHoldCleansUp(t tb, s *suite) {
	errLost := errors.New("leasetest: the reply was lost")
	errClock := errors.New("leasetest: the clock failed")
	cases := []struct {
		name string
		hold func(h holdCall) error // Hold or TryHold, and its error
		want error
	}{{
		name: "a gate of AdmitAt fails because ctx ended",
		hold: func(h holdCall) error {
			return h.hold(h.svc, leasefence.HoldOptions{AdmitAt: []leasefence.Gate{&StalledGate{Name: h.resource, Cancel: h.cancel}}})
		},
		want: context.Canceled,
	}, {
		name: "the grant leaves no room to renew and ctx ended as it came",
		hold: func(h holdCall) error {
			return h.hold(&replyLoss{Service: h.svc, lose: func() error { h.cancel(); return nil }}, leasefence.HoldOptions{RenewEvery: 100 * s.TTL})
		},
		want: leasefence.ErrNoRoomToRenew,
	}, {
		name: "the grant arrives past its deadline and ctx ended as it came",
		hold: func(h holdCall) error {
			return h.hold(&replyLoss{Service: h.svc, lose: func() error { h.clock.Advance(s.TTL); h.cancel(); return nil }}, leasefence.HoldOptions{})
		},
		want: context.Canceled,
	}, {
		name: "the client's clock fails as the grant comes",
		hold: func(h holdCall) error {
			return h.hold(&replyLoss{Service: h.svc, lose: func() error { h.clock.fail.Store(errClock); return nil }}, leasefence.HoldOptions{})
		},
		want: errClock,
	}, {
		name: "the reply is lost to ctx's end",
		hold: func(h holdCall) error {
			return h.hold(&replyLoss{Service: h.svc, lose: func() error { h.cancel(); return h.ctx.Err() }}, leasefence.HoldOptions{})
		},
		want: context.Canceled,
	}, {
		name: "ctx ends while Hold backs off after a lost reply",
		hold: func(h holdCall) error {
			// The backoff's timer never fires; asking for it ends ctx.
			after := func(time.Duration) <-chan time.Time { h.cancel(); return nil }
			return h.hold(&replyLoss{Service: h.svc, lose: func() error { return errLost }}, leasefence.HoldOptions{After: after})
		},
		want: context.Canceled,
	}, {
		name: "TryHold's reply is lost",
		hold: func(h holdCall) error {
			_, err := leasefence.TryHold(h.ctx, &replyLoss{Service: h.svc, lose: func() error { return errLost }}, h.client, h.resource, leasefence.HoldOptions{})
			return err
		},
		want: errLost,
	}}
	for i, tc := range cases {
		t.run(tc.name, func(t tb) {
			s := s.in(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			clock := &failingClock{ManualClock: leasefence.NewManualClock("agent-a")}
			client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "agent-a"})
			if err != nil {
				t.Fatal(err)
			}
			h := holdCall{ctx: ctx, cancel: cancel, svc: s.Service, client: client, clock: clock, resource: fmt.Sprintf("r%d", i)}
			if err := tc.hold(h); !errors.Is(err, tc.want) {
				t.Fatalf("Hold = %v, want an error matching %v", err, tc.want)
			}
			if out := s.acquireReq(s.begin(s.client("agent-b"), h.resource)); !out.OK {
				t.Fatalf("after the failed Hold, another holder's acquire = %+v: the lease is still held, want it released", out)
			}
		})
	}
}

// holdCall is what a case of testHoldCleansUp holds with: ctx, which
// cancel ends, the service under test, and a client on a manual clock,
// which only the case advances or makes fail.
type holdCall struct {
	ctx      context.Context
	cancel   context.CancelFunc
	svc      leasefence.Service
	client   *leasefence.Client
	clock    *failingClock
	resource string
}

// failingClock is a manual clock whose readings fail with the error in
// fail once it is set.
type failingClock struct {
	*leasefence.ManualClock
	fail atomic.Value // error
}

func (c *failingClock) Now() (leasefence.Instant, error) {
	if err, _ := c.fail.Load().(error); err != nil {
		return leasefence.Instant{}, err
	}
	return c.ManualClock.Now()
}

// hold calls Hold through svc and returns its error.
func (h holdCall) hold(svc leasefence.Service, opts leasefence.HoldOptions) error {
	_, err := leasefence.Hold(h.ctx, svc, h.client, h.resource, opts)
	return err
}

// replyLoss is a Service whose first acquire reaches the service whatever
// the caller's ctx, after which lose runs (it may end the caller's ctx, as
// a deadline that falls while the reply is on its way) and its error, if
// any, replaces the answer: the grant is made and its reply lost.
type replyLoss struct {
	leasefence.Service
	lose func() error
	sent atomic.Bool
}

func (r *replyLoss) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	if r.sent.Swap(true) {
		return r.Service.Acquire(ctx, req)
	}
	out, err := r.Service.Acquire(context.WithoutCancel(ctx), req)
	if err != nil {
		return out, err
	}
	if err := r.lose(); err != nil {
		return leasefence.AcquireOutcome{}, err
	}
	return out, nil
}

// StalledGate is a gate for HoldOptions.AdmitAt that is still admitting
// when the caller's ctx ends, as a gate slower than the caller's deadline
// is: Admit ends ctx itself if Cancel is set, waits for ctx to end and
// fails with its error. It implements Resource and Admit, all Hold calls;
// its other methods are not implemented. Safe for concurrent use.
type StalledGate struct {
	leasefence.Gate
	Name   string             // the resource it guards
	Cancel context.CancelFunc // if non-nil, Admit calls it first
	admits atomic.Int64
}

// Resource implements leasefence.Gate.
func (g *StalledGate) Resource() string { return g.Name }

// Admit implements leasefence.Gate: it never admits.
func (g *StalledGate) Admit(ctx context.Context, _ leasefence.Token) error {
	g.admits.Add(1)
	if g.Cancel != nil {
		g.Cancel()
	}
	<-ctx.Done()
	return ctx.Err()
}

// Admits is how many times Admit was called.
func (g *StalledGate) Admits() int64 { return g.admits.Load() }
