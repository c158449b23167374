package sqlgate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// LoggedRejection is one entry of a gate's refusal log, with the instant
// the database logged it.
type LoggedRejection struct {
	leasefence.Rejection
	// At is the database's clock when the refusal was logged.
	At time.Time `json:"at"`
}

// Rejections returns the resource's whole refusal log, oldest first (Seq 1,
// 2, 3, ...): RejectionsSince from 0.
func (g *Gate) Rejections(ctx context.Context) ([]leasefence.Rejection, error) {
	rs, _, err := g.RejectionsSince(ctx, 0)
	return rs, err
}

// RejectionsSince returns the refusals logged with a Seq above seq, oldest
// first: pass the last Seq seen to read only what is new. The log keeps
// every refusal, so missed is always 0. LogSince returns the same entries
// with the instant each was logged.
func (g *Gate) RejectionsSince(ctx context.Context, seq uint64) (rs []leasefence.Rejection, missed uint64, err error) {
	entries, err := g.logSince(ctx, "RejectionsSince", seq)
	if err != nil {
		return nil, 0, err
	}
	rs = make([]leasefence.Rejection, len(entries))
	for i, e := range entries {
		rs[i] = e.Rejection
	}
	return rs, 0, nil
}

// LogSince returns the refusals logged with a Seq above seq, oldest first,
// with the instant each was logged.
func (g *Gate) LogSince(ctx context.Context, seq uint64) ([]LoggedRejection, error) {
	return g.logSince(ctx, "LogSince", seq)
}

func (g *Gate) logSince(ctx context.Context, op string, seq uint64) ([]LoggedRejection, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: sqlgate.%s with a nil context", leasefence.ErrInvalidRequest, op)
	}
	after := int64(min(seq, math.MaxInt64))
	var out []LoggedRejection
	err := g.retry(ctx, "reading the log", func() error {
		var err error
		out, err = g.readLog(ctx, after)
		return err
	})
	return out, err
}

// RejectionCount returns how many refusals were ever logged: the Seq of the
// newest.
func (g *Gate) RejectionCount(ctx context.Context) (uint64, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: sqlgate.RejectionCount with a nil context", leasefence.ErrInvalidRequest)
	}
	var n int64
	err := g.retry(ctx, "counting the log", func() error {
		err := g.db.QueryRowContext(ctx, g.q.refused, g.resource).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q in %s", ErrNoFloor, g.resource, g.floorTab)
		}
		return err
	})
	return uint64(n), err
}

func (g *Gate) readLog(ctx context.Context, after int64) ([]LoggedRejection, error) {
	rows, err := g.db.QueryContext(ctx, g.q.log, g.resource, after)
	if err != nil {
		return nil, fmt.Errorf("sqlgate: reading the log of %q: %w", g.resource, err)
	}
	defer rows.Close()
	out := []LoggedRejection{}
	for rows.Next() {
		var e LoggedRejection
		var seq, fence, floorFence, atMicros int64
		if err := rows.Scan(&seq, &e.Holder, &fence, &e.FloorHolder, &floorFence, &atMicros); err != nil {
			return nil, fmt.Errorf("sqlgate: reading the log of %q: %w", g.resource, err)
		}
		e.Seq, e.Resource, e.Fence, e.FloorFence = uint64(seq), g.resource, leasefence.Fence(fence), leasefence.Fence(floorFence)
		e.At = time.UnixMicro(atMicros).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlgate: reading the log of %q: %w", g.resource, err)
	}
	return out, nil
}
