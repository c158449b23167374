package redislease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
)

var _ leasefence.HolderReader = (*Coordinator)(nil)

// Holder returns the token of the live lease on resource and true, or the
// zero Token and false when none is live, from one GET of the resource's
// holder key ("<fence>:<holder>"), which Redis expires with the lease.
// Like every HolderReader answer it is advisory: for operators and
// dashboards, never for deciding whether a write may land.
func (c *Coordinator) Holder(ctx context.Context, resource string) (leasefence.Token, bool, error) {
	if ctx == nil {
		return leasefence.Token{}, false, nilCtx("holder")
	}
	if err := leasefence.ValidateID(leasefence.IDResource, resource); err != nil {
		return leasefence.Token{}, false, fmt.Errorf("holder: %w", err)
	}
	v, err := c.rdb.Get(ctx, c.keys.holder(resource)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return leasefence.Token{}, false, nil
	case err != nil:
		return leasefence.Token{}, false, fmt.Errorf("redislease: holder of %q: %w", resource, err)
	}
	fence, holder, ok := strings.Cut(v, ":")
	f, ferr := strconv.ParseUint(fence, 10, 64)
	if !ok || ferr != nil || f == 0 || holder == "" {
		return leasefence.Token{}, false, fmt.Errorf("redislease: holder key of %q holds %q, not <fence>:<holder>", resource, v)
	}
	return leasefence.Token{Resource: resource, Holder: holder, Fence: leasefence.Fence(f)}, true, nil
}
