package fencetoken

import (
	"context"

	"github.com/leasefence/lab/leasefence"
)

// The context keys shared by the transports (fencehttp, fencegrpc), so that
// a lease put in a context once is presented by whichever carries the call.
type (
	leaseKey struct{}
	tokenKey struct{}
)

// ContextWithLease returns a copy of ctx that carries lease, whose Proof a
// client transport presents with each call made under it.
func ContextWithLease(ctx context.Context, lease leasefence.Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, lease)
}

// LeaseFromContext returns the lease ctx carries, if any.
func LeaseFromContext(ctx context.Context) (leasefence.Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(leasefence.Lease)
	return l, ok
}

// ContextWithToken returns a copy of ctx that carries t, a token a server
// verified from the call's proof.
func ContextWithToken(ctx context.Context, t leasefence.Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// TokenFromContext returns the verified token ctx carries, if any.
func TokenFromContext(ctx context.Context) (leasefence.Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(leasefence.Token)
	return t, ok
}
