package sqllease_test

import (
	"context"
	"crypto/rand"
	"strings"
	"sync/atomic"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqllease"
)

// alternating sends each call to the next of its coordinators in turn,
// as clients of one service spread over processes would.
type alternating struct {
	coords []*sqllease.Coordinator
	n      atomic.Uint64
}

func alternate(coords ...*sqllease.Coordinator) *alternating { return &alternating{coords: coords} }

func (a *alternating) next() *sqllease.Coordinator {
	return a.coords[(a.n.Add(1)-1)%uint64(len(a.coords))]
}

func (a *alternating) Acquire(ctx context.Context, req leasefence.AcquireRequest) (leasefence.AcquireOutcome, error) {
	return a.next().Acquire(ctx, req)
}

func (a *alternating) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	return a.next().Renew(ctx, req)
}

func (a *alternating) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	return a.next().Release(ctx, t)
}

func (a *alternating) Holder(ctx context.Context, resource string) (leasefence.Token, bool, error) {
	return a.next().Holder(ctx, resource)
}

// tableSuffix makes a table name no other test of the run uses.
func tableSuffix() string { return strings.ToLower(rand.Text()[:10]) }
