package sqlgate_test

import (
	"context"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// asSharedGate gives g the shape of leasefence.Gate for the conformance
// suite, from its RejectionsAfter. Once *sqlgate.Gate implements
// leasefence.Gate itself, this file goes and asSharedGate(g) is g.
func asSharedGate(g *sqlgate.Gate) leasefence.Gate { return sharedGate{g} }

type sharedGate struct{ *sqlgate.Gate }

func (g sharedGate) RejectionsSince(ctx context.Context, seq uint64) ([]leasefence.Rejection, uint64, error) {
	entries, err := g.RejectionsAfter(ctx, seq)
	if err != nil {
		return nil, 0, err
	}
	var out []leasefence.Rejection
	for _, e := range entries {
		out = append(out, e.Rejection)
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
