package etcdlease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/leasetest"
)

func newCoordinator(t *testing.T, opts etcdlease.Options) *etcdlease.Coordinator {
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
	leasetest.TestService(t, func(t *testing.T) leasetest.Harness {
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
