package fencegrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// MetadataKey is the metadata key that carries a lease's proof.
const MetadataKey = "fence-token"

// WithLease returns a copy of ctx carrying lease: a call made with it
// through the client interceptors presents lease.Proof. The key is
// fencetoken's, shared with fencehttp.
func WithLease(ctx context.Context, lease leasefence.Lease) context.Context {
	return fencetoken.ContextWithLease(ctx, lease)
}

// Token returns the token the server interceptors verified for the call
// whose context is ctx.
func Token(ctx context.Context) (leasefence.Token, bool) {
	return fencetoken.TokenFromContext(ctx)
}

// ErrNoProof is returned by the client interceptors for a call whose
// context carries a lease without a proof: the coordinator that granted it
// has no Prover, and the server would answer Unauthenticated.
var ErrNoProof = errors.New("fencegrpc: the lease has no proof")

// stamp returns ctx with the proof of the lease it carries in the outgoing
// metadata, ctx itself when it carries no lease.
func stamp(ctx context.Context) (context.Context, error) {
	lease, ok := fencetoken.LeaseFromContext(ctx)
	if !ok {
		return ctx, nil
	}
	if lease.Proof == "" {
		return nil, fmt.Errorf("%w: %v", ErrNoProof, lease.Token)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(MetadataKey, lease.Proof)
	return metadata.NewOutgoingContext(ctx, md), nil
}

// UnaryClientInterceptor stamps each call's proof from the lease in its
// context (WithLease); a call without a lease passes through untouched.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, err := stamp(ctx)
		if err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams: the proof
// is sent once, with the stream's headers.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, err := stamp(ctx)
		if err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}
