package etcdlease_test

import (
	"context"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// harness is the adapter of resource's gate as the conformance suite takes it.
func (a *gateAdapter) harness(resource string) leasetest.GateHarness {
	return leasetest.GateHarness{Gate: asSharedGate(a.gate, resource), Commit: a.Commit, Written: a.Written}
}

// asSharedGate gives g the shape of leasefence.Gate for the conformance
// suite, from its Rejections. Once *etcdlease.Gate implements
// leasefence.Gate itself, this shim goes and asSharedGate(g) is g.
func asSharedGate(g *etcdlease.Gate, resource string) leasefence.Gate { return sharedGate{g, resource} }

type sharedGate struct {
	*etcdlease.Gate
	resource string
}

func (g sharedGate) Resource() string { return g.resource }

func (g sharedGate) RejectionsSince(ctx context.Context, seq uint64) ([]leasefence.Rejection, uint64, error) {
	rs, err := g.Rejections(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out []leasefence.Rejection
	for _, r := range rs {
		if r.Seq > seq {
			out = append(out, r)
		}
	}
	return out, 0, nil
}

func (g sharedGate) RejectionCount(ctx context.Context) (uint64, error) {
	rs, err := g.Rejections(ctx)
	if err != nil || len(rs) == 0 {
		return 0, err
	}
	return rs[len(rs)-1].Seq, nil
}
