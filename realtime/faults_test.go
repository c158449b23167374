package realtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// countingService answers every call OK and counts what reached it.
type countingService struct{ acquires, renews, releases atomic.Int64 }

func (s *countingService) Acquire(context.Context, leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	s.acquires.Add(1)
	return leasefence.AcquireOutcome{OK: true}, nil
}

func (s *countingService) Renew(context.Context, leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	s.renews.Add(1)
	return leasefence.RenewOutcome{OK: true}, nil
}

func (s *countingService) Release(context.Context, leasefence.Token) (leasefence.ReleaseOutcome, error) {
	s.releases.Add(1)
	return leasefence.ReleaseOutcome{OK: true}, nil
}

// The fault layer drops and duplicates exactly what it is told to, counts
// it, tells its observer, and lets a dropped reply's call happen.
func TestFaultsDoWhatTheyAreTold(t *testing.T) {
	const n = 50
	for _, tc := range []struct {
		name        string
		net         spec.Network
		partitioned bool
		wantErr     error
		reached     int64 // calls that reached the service
		stats       realtime.FaultStats
		observed    map[history.Kind]int
	}{
		{name: "clean", reached: n, stats: realtime.FaultStats{Calls: n},
			observed: map[history.Kind]int{history.RequestSent: n}},
		{name: "drop requests", net: spec.Network{DropRequests: 1}, wantErr: realtime.ErrRequestDropped, reached: 0,
			stats:    realtime.FaultStats{Calls: n, RequestsDropped: n},
			observed: map[history.Kind]int{history.RequestSent: n, history.RequestDropped: n}},
		{name: "drop replies", net: spec.Network{DropReplies: 1}, wantErr: realtime.ErrReplyDropped, reached: n,
			stats:    realtime.FaultStats{Calls: n, RepliesDropped: n},
			observed: map[history.Kind]int{history.RequestSent: n, history.ReplyDropped: n}},
		{name: "duplicate", net: spec.Network{Duplicate: 1}, reached: 2 * n,
			stats:    realtime.FaultStats{Calls: n, Duplicated: n},
			observed: map[history.Kind]int{history.RequestSent: n, history.RequestDuplicated: n}},
		{name: "partition", partitioned: true, wantErr: realtime.ErrPartitioned, reached: 0,
			stats:    realtime.FaultStats{Calls: n, RequestsDropped: n, Partitioned: n},
			observed: map[history.Kind]int{history.RequestSent: n, history.RequestDropped: n}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &countingService{}
			observed := map[history.Kind]int{}
			f := realtime.NewFaults(func() leasefence.Service { return svc }, tc.net, 1, 1,
				func() bool { return tc.partitioned },
				func(_ realtime.Call, k history.Kind, _ time.Duration) { observed[k]++ })
			for i := range n {
				var err error
				switch i % 3 {
				case 0:
					_, err = f.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "r"})
				case 1:
					_, err = f.Renew(t.Context(), leasefence.RenewRequest{RequestID: "r"})
				default:
					_, err = f.Release(t.Context(), leasefence.Token{})
				}
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("call %d: %v, want %v", i, err, tc.wantErr)
				}
			}
			if got := svc.acquires.Load() + svc.renews.Load() + svc.releases.Load(); got != tc.reached {
				t.Errorf("%d calls reached the service, want %d", got, tc.reached)
			}
			if f.Stats() != tc.stats {
				t.Errorf("stats %+v, want %+v", f.Stats(), tc.stats)
			}
			for k, want := range tc.observed {
				if observed[k] != want {
					t.Errorf("observed %d %v, want %d", observed[k], k, want)
				}
			}
			if len(observed) != len(tc.observed) {
				t.Errorf("observed %v, want only %v", observed, tc.observed)
			}
		})
	}
}

// The same seed and stream give the same fates, call for call, and the
// rates are what they are set to.
func TestFaultsSeeded(t *testing.T) {
	fates := func(seed uint64) []error {
		f := realtime.NewFaults(func() leasefence.Service { return &countingService{} },
			spec.Network{DropRequests: 0.2, DropReplies: 0.2}, seed, 3, nil, nil)
		var out []error
		for range 500 {
			_, err := f.Acquire(t.Context(), leasefence.AcquireRequest{})
			out = append(out, err)
		}
		return out
	}
	a, b, c := fates(7), fates(7), fates(8)
	same, differ := true, false
	dropped := 0
	for i := range a {
		same = same && a[i] == b[i]
		differ = differ || a[i] != c[i]
		if a[i] != nil {
			dropped++
		}
	}
	if !same || !differ {
		t.Errorf("same seed gives the same fates: %v; another seed differs: %v", same, differ)
	}
	// 1 - 0.8*0.8 = 36% of calls lose a message.
	if dropped < 130 || dropped > 230 {
		t.Errorf("%d of 500 calls dropped, want about 180", dropped)
	}
}

// A reply thrown away after the coordinator granted: the retry of the same
// request gets the same grant, and burns no fence.
func TestDroppedReplyRetryIsIdempotent(t *testing.T) {
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: leasefence.NewMonotonicClock("c"), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("a"), Holder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	lossy := realtime.NewFaults(func() leasefence.Service { return leasefence.Local(coord) }, spec.Network{DropReplies: 1}, 1, 1, nil, nil)
	clean := realtime.NewFaults(func() leasefence.Service { return leasefence.Local(coord) }, spec.Network{}, 1, 1, nil, nil)
	req, _ := client.BeginAcquire("res")
	if _, err := lossy.Acquire(t.Context(), req); !errors.Is(err, realtime.ErrReplyDropped) {
		t.Fatalf("lossy acquire: %v", err)
	}
	out, err := clean.Acquire(t.Context(), req)
	if err != nil || !out.OK || out.Grant.Token.Fence != 1 || coord.IssuedFence() != 1 {
		t.Fatalf("retry: %+v, %v; issued %d", out, err, coord.IssuedFence())
	}
}
