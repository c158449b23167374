package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/leasefence/lab/leasefence"
)

// Renew extends t's lease to the TTL from the database's clock now, in one
// conditional UPDATE that matches only t's current, live lease (resource,
// holder, fence, not released, not expired): a stale token never extends a
// newer holder's lease, and an expired lease is never resurrected. The
// grant keeps the fence. A refusal says why, from the resource's row read
// after the UPDATE matched nothing.
func (c *Coordinator) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	if err := c.ready(ctx, "renew", leasefence.ValidateRenew(req)); err != nil {
		return leasefence.RenewOutcome{}, err
	}
	reason, err := c.act(ctx, "renew", c.q.renew, req.Token, c.ttl.Microseconds())
	if err != nil || reason != "" {
		return leasefence.RenewOutcome{Reason: reason}, err
	}
	now, err := c.clock.Now()
	if err != nil {
		return leasefence.RenewOutcome{}, fmt.Errorf("sqllease: coordinator clock: %w", err)
	}
	return leasefence.RenewOutcome{OK: true, Grant: leasefence.Grant{
		RequestID: req.RequestID, Token: req.Token, TTL: c.ttl, CoordinatorExpiresAt: now.Add(c.ttl),
	}}, nil
}

// Release frees t's lease, in one conditional UPDATE that matches only t's
// current, live lease; the resource's highest fence and the request ids
// stay, so the next grant mints a higher fence and a retried request is
// answered "stale-request". Anything else answers with Renew's reasons.
func (c *Coordinator) Release(ctx context.Context, t leasefence.Token) (leasefence.ReleaseOutcome, error) {
	if err := c.ready(ctx, "release", leasefence.ValidateToken(t)); err != nil {
		return leasefence.ReleaseOutcome{}, err
	}
	reason, err := c.act(ctx, "release", c.q.release, t)
	return leasefence.ReleaseOutcome{OK: err == nil && reason == "", Reason: reason}, err
}

// act runs a renew or release statement for t and returns "" if it acted,
// or the reason it did not.
func (c *Coordinator) act(ctx context.Context, op, stmt string, t leasefence.Token, extra ...any) (leasefence.Reason, error) {
	if t.Fence > math.MaxInt64 {
		return leasefence.ReasonUnknown, nil // never issued: the counter is a signed 64-bit integer
	}
	var reason leasefence.Reason
	err := retry(ctx, c.dialect, op+" "+t.String(), func() error {
		res, err := c.db.ExecContext(ctx, stmt, append([]any{t.Resource, t.Holder, int64(t.Fence)}, extra...)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n > 0 {
			reason = ""
			return err
		}
		reason, err = c.why(ctx, t)
		return err
	})
	return reason, err
}

// why says why t is not its resource's current, live lease, from the
// resource's row: a lower fence than the row's is superseded; the row's
// fence and holder, released or expired; anything else was never issued.
// The row only moves forward, so the answer holds from the moment the
// UPDATE matched nothing.
func (c *Coordinator) why(ctx context.Context, t leasefence.Token) (leasefence.Reason, error) {
	var holder string
	var fence, released, live int64
	err := c.db.QueryRowContext(ctx, c.q.state, t.Resource).Scan(&holder, &fence, &released, &live)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return leasefence.ReasonUnknown, nil
	case err != nil:
		return "", err
	case int64(t.Fence) < fence:
		return leasefence.ReasonSuperseded, nil
	case int64(t.Fence) > fence || t.Holder != holder:
		return leasefence.ReasonUnknown, nil
	case released != 0:
		return leasefence.ReasonReleased, nil
	case live == 0:
		return leasefence.ReasonExpired, nil
	}
	// The UPDATE found t's lease expired and this read finds it live: only
	// a clock that stepped back between the two (SQLite's wall clock) does
	// that. The UPDATE decided.
	return leasefence.ReasonExpired, nil
}

// Holder returns the token of the live lease on resource and true, or the
// zero Token and false when none is live, from one read of the resource's
// row against the database's clock. Advisory, like every HolderReader
// answer.
func (c *Coordinator) Holder(ctx context.Context, resource string) (leasefence.Token, bool, error) {
	if err := c.ready(ctx, "holder", leasefence.ValidateID(leasefence.IDResource, resource)); err != nil {
		return leasefence.Token{}, false, err
	}
	var holder string
	var fence int64
	err := c.db.QueryRowContext(ctx, c.q.holder, resource).Scan(&holder, &fence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return leasefence.Token{}, false, nil
	case err != nil:
		return leasefence.Token{}, false, fmt.Errorf("sqllease: holder of %q: %w", resource, err)
	}
	return leasefence.Token{Resource: resource, Holder: holder, Fence: leasefence.Fence(fence)}, true, nil
}
