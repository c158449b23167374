package etcdlease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/leasefence/leasetest"
)

func newCoordinator(t testing.TB, opts etcdlease.Options) *etcdlease.Coordinator {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = newPrefix()
	}
	if opts.TTL == 0 {
		opts.TTL = time.Second
	}
	c, err := etcdlease.New(cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	leasetest.TestService(t, func(t testing.TB) leasetest.Harness {
		return leasetest.Harness{
			Service: newCoordinator(t, etcdlease.Options{TTL: time.Second}),
			TTL:     time.Second,
			Elapse:  time.Sleep,
			Settle:  time.Second,
		}
	})
}

func TestNewOptions(t *testing.T) {
	for _, opts := range []etcdlease.Options{
		{},
		{TTL: 500 * time.Millisecond},
		{TTL: 1500 * time.Millisecond},
		{TTL: -time.Second},
		{TTL: time.Second, ReplayWindow: -time.Second},
		{TTL: time.Second, ReplayWindow: 1500 * time.Millisecond},
	} {
		if _, err := etcdlease.New(cli, opts); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("New(%+v) = %v, want ErrInvalidRequest", opts, err)
		}
	}
	if _, err := etcdlease.New(nil, etcdlease.Options{TTL: time.Second}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("New(nil client) = %v", err)
	}
}

// A retry after a lost reply is answered from etcd, whichever coordinator
// process receives it: two Coordinators on two clients share one prefix.
func TestRetryAcrossCoordinatorProcesses(t *testing.T) {
	other, err := etcdembed.Client(member.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	prefix := newPrefix()
	first := newCoordinator(t, etcdlease.Options{Prefix: prefix})
	second, err := etcdlease.New(other, etcdlease.Options{Prefix: prefix, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-a"), Holder: "agent-a"})
	req, _ := client.BeginAcquire("r")
	granted, err := first.Acquire(t.Context(), req) // its reply is "lost": the client never sees it
	if err != nil || !granted.OK {
		t.Fatalf("Acquire = %+v, %v", granted, err)
	}
	retried, err := second.Acquire(t.Context(), req)
	if err != nil || !retried.OK || retried.Grant.Token != granted.Grant.Token || retried.Grant.TTL != granted.Grant.TTL {
		t.Fatalf("retry through another coordinator = %+v, %v; want %+v", retried, err, granted.Grant)
	}
	if _, err := client.CompleteAcquire(req, retried.Grant); err != nil {
		t.Fatal(err)
	}
	// And the release through the first is seen by the second.
	if out, err := first.Release(t.Context(), granted.Grant.Token); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	if out, err := second.Acquire(t.Context(), req); err != nil || out.Reason != leasefence.ReasonStaleRequest {
		t.Fatalf("retry after release = %+v, %v; want stale-request", out, err)
	}
}

func TestCorruptKey(t *testing.T) {
	prefix := newPrefix()
	coord := newCoordinator(t, etcdlease.Options{Prefix: prefix})
	if _, err := cli.Put(t.Context(), prefix+"last/r", "not json"); err != nil {
		t.Fatal(err)
	}
	_, err := coord.Release(t.Context(), leasefence.Token{Resource: "r", Holder: "a", Fence: 1})
	if !errors.Is(err, etcdlease.ErrCorruptKey) {
		t.Fatalf("Release over a corrupt key = %v, want ErrCorruptKey", err)
	}
}
