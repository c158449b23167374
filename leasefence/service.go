package leasefence

import (
	"context"
	"fmt"
)

// Service is a coordinator reached through calls that may cross a network.
// Outcomes and reasons mean exactly what they mean for Coordinator; a non-nil
// error means no answer was had (network, store, ctx), never a refusal.
//
// Because an error means "no answer", a caller cannot tell from it whether
// the request took effect: an acquire whose reply was lost may have minted a
// grant. Resend the same AcquireRequest (same RequestID) to learn it; the
// service answers a retried id with the grant already made while that lease
// is live. Hold does exactly this.
//
// Implementations are safe for concurrent use. A nil ctx is an error
// wrapping ErrInvalidRequest, never a panic.
type Service interface {
	Acquire(ctx context.Context, req AcquireRequest) (AcquireOutcome, error)
	Renew(ctx context.Context, req RenewRequest) (RenewOutcome, error)
	Release(ctx context.Context, t Token) (ReleaseOutcome, error)
}

// HolderReader is a coordinator that can say who holds a resource, as
// etcd's Election.Leader does. Services implement it beside Service; the
// in-memory one (Local), etcdlease's and redislease's do. Find it with a
// type assertion:
//
//	if hr, ok := svc.(leasefence.HolderReader); ok { ... }
//
// ADVISORY, like Lease.HasExpired: the answer holds at the instant the
// coordinator read it, and the lease may be gone, or another's, by the time
// the caller acts on it. It is for operators and dashboards, never for
// deciding whether a write may land; the gate decides that.
type HolderReader interface {
	// Holder returns the token of the live lease on resource and true, or
	// the zero Token and false when no lease on it is live. A nil ctx or an
	// empty resource is an error wrapping ErrInvalidRequest; any other
	// error means no answer was had.
	Holder(ctx context.Context, resource string) (Token, bool, error)
}

// Local returns the in-memory Coordinator c as a Service. The coordinator
// never blocks, so ctx is only consulted before the call: a ctx already done
// returns its error and leaves the coordinator untouched. Local(nil) returns
// a Service whose every call fails with ErrInvalidRequest. It also
// implements HolderReader.
func Local(c *Coordinator) Service { return localService{c: c} }

type localService struct{ c *Coordinator }

var _ HolderReader = localService{}

// ready refuses a call that must not reach the coordinator.
func (s localService) ready(ctx context.Context, op string) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: %s with a nil context", ErrInvalidRequest, op)
	case s.c == nil:
		return fmt.Errorf("%w: %s on Local(nil)", ErrInvalidRequest, op)
	}
	return ctx.Err()
}

func (s localService) Acquire(ctx context.Context, req AcquireRequest) (AcquireOutcome, error) {
	if err := s.ready(ctx, "acquire"); err != nil {
		return AcquireOutcome{}, err
	}
	return s.c.Acquire(req)
}

func (s localService) Renew(ctx context.Context, req RenewRequest) (RenewOutcome, error) {
	if err := s.ready(ctx, "renew"); err != nil {
		return RenewOutcome{}, err
	}
	return s.c.Renew(req)
}

func (s localService) Release(ctx context.Context, t Token) (ReleaseOutcome, error) {
	if err := s.ready(ctx, "release"); err != nil {
		return ReleaseOutcome{}, err
	}
	return s.c.Release(t)
}

func (s localService) Holder(ctx context.Context, resource string) (Token, bool, error) {
	if err := s.ready(ctx, "holder"); err != nil {
		return Token{}, false, err
	}
	return s.c.Holder(resource)
}
