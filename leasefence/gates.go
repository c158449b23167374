package leasefence

import (
	"context"
	"fmt"
)

// Gate is what every fence gate shares, whatever store keeps its floor and
// its refusal log: the in-memory FenceGate (through AsGate), and the gates of
// packages sqlgate and etcdlease. Commit is not part of it: each gate takes
// the write in the shape natural to its store (a func of a ctx, a *sql.Tx,
// etcd ops), and runs it in the operation that admits the token.
//
// The contract every implementation keeps, checked by leasetest.TestGate:
//   - Admit raises the floor to t if t is admitted (t's fence above the
//     floor, or the floor's own fence from the floor's holder), and returns
//     nil; it refuses a lower fence with a *StaleFenceError (Seq 0, not
//     logged) and never lowers the floor.
//   - Floor returns the highest token admitted: the zero Token before any.
//   - RejectionsSince returns the retained refusals whose Seq is above seq,
//     oldest first, with consecutive Seqs, and how many refusals above seq
//     are no longer retained (missed). A refusal is returned to a writer only
//     once it is in this log.
//   - RejectionCount is the number of refusals ever logged, which is also
//     the Seq of the newest.
//   - Every method refuses a nil ctx with ErrInvalidRequest and ends with
//     ctx's error once ctx ends; none leaves anything locked behind it.
type Gate interface {
	// Resource is the one resource this gate guards.
	Resource() string
	// Admit raises the floor to t without a write.
	Admit(ctx context.Context, t Token) error
	// Floor reads the highest token admitted.
	Floor(ctx context.Context) (Token, error)
	// RejectionsSince reads the logged refusals after seq.
	RejectionsSince(ctx context.Context, seq uint64) (rs []Rejection, missed uint64, err error)
	// RejectionCount reads how many refusals were ever logged.
	RejectionCount(ctx context.Context) (uint64, error)
}

// AsGate returns g as a Gate. FenceGate's own methods take no ctx, since
// they never wait on I/O; the adapter checks ctx as every Gate must, so code
// written against Gate treats every store alike.
func AsGate(g *FenceGate) Gate { return memoryGate{g} }

type memoryGate struct{ g *FenceGate }

var _ Gate = memoryGate{}

func (m memoryGate) Resource() string { return m.g.Resource() }

func (m memoryGate) Admit(ctx context.Context, t Token) error {
	if err := checkCtx(ctx, "Admit"); err != nil {
		return err
	}
	return m.g.Admit(t)
}

func (m memoryGate) Floor(ctx context.Context) (Token, error) {
	if err := checkCtx(ctx, "Floor"); err != nil {
		return Token{}, err
	}
	if m.g.resource == "" {
		return Token{}, errZeroGate("Floor")
	}
	return m.g.Floor(), nil
}

func (m memoryGate) RejectionsSince(ctx context.Context, seq uint64) ([]Rejection, uint64, error) {
	if err := checkCtx(ctx, "RejectionsSince"); err != nil {
		return nil, 0, err
	}
	if m.g.resource == "" {
		return nil, 0, errZeroGate("RejectionsSince")
	}
	rs, missed := m.g.RejectionsSince(seq)
	return rs, missed, nil
}

func (m memoryGate) RejectionCount(ctx context.Context) (uint64, error) {
	if err := checkCtx(ctx, "RejectionCount"); err != nil {
		return 0, err
	}
	if m.g.resource == "" {
		return 0, errZeroGate("RejectionCount")
	}
	return uint64(m.g.RejectionCount()), nil
}

// checkCtx refuses a nil ctx, and one that has already ended.
func checkCtx(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("%w: %s with a nil context", ErrInvalidRequest, op)
	}
	return ctx.Err()
}

func errZeroGate(op string) error {
	return fmt.Errorf("%w: %s at a zero FenceGate; make one with NewFenceGate", ErrUninitialized, op)
}
