package etcdlease

import (
	"context"
	"fmt"

	"github.com/leasefence/lab/leasefence"
)

var _ leasefence.HolderReader = (*Coordinator)(nil)

// Holder returns the token of the live lease on resource and true, or the
// zero Token and false when no lease on it is live, like etcd's
// Election.Leader: one read of the resource's holder key, whose create
// revision is the fence and whose value is the holder.
//
// The holder key goes with its etcd lease, and etcd revokes an expired
// lease within about half a second, so a lease that expired in that last
// moment may still be reported, as Acquire and Renew treat it too. Like
// every HolderReader answer it is advisory: for operators and dashboards,
// never for deciding whether a write may land.
func (c *Coordinator) Holder(ctx context.Context, resource string) (leasefence.Token, bool, error) {
	switch {
	case ctx == nil:
		return leasefence.Token{}, false, fmt.Errorf("%w: holder with a nil context", leasefence.ErrInvalidRequest)
	case resource == "":
		return leasefence.Token{}, false, fmt.Errorf("%w: holder of an empty resource", leasefence.ErrInvalidRequest)
	}
	resp, err := c.cli.Get(ctx, c.keys.holder(resource))
	if err != nil {
		return leasefence.Token{}, false, fmt.Errorf("etcdlease: holder of %q: %w", resource, err)
	}
	if len(resp.Kvs) == 0 {
		return leasefence.Token{}, false, nil
	}
	kv := resp.Kvs[0]
	return leasefence.Token{Resource: resource, Holder: string(kv.Value), Fence: leasefence.Fence(kv.CreateRevision)}, true, nil
}
