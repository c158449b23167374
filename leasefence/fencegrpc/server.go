package fencegrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// The ErrorInfo reasons of the Unauthenticated answers.
const (
	ReasonMissingProof = "MISSING_PROOF"
	ReasonInvalidProof = "INVALID_PROOF"
)

// ServerOption configures the server interceptors.
type ServerOption func(*serverConfig)

type serverConfig struct {
	refused func(RefusedInfo)
}

// OnRefused sets a hook called for every call the interceptor refuses,
// before the answer: a tracing or metrics hook (the count of failed
// verifications is also Verifier.Refused). It runs on the call's goroutine.
func OnRefused(f func(RefusedInfo)) ServerOption {
	return func(c *serverConfig) { c.refused = f }
}

// RefusedInfo describes a call a server interceptor refused.
type RefusedInfo struct {
	Ctx        context.Context
	FullMethod string
	// Err says why: ErrMissingProof, or an error wrapping
	// fencetoken.ErrInvalid.
	Err error
}

// ErrMissingProof is RefusedInfo.Err for a call without a fence-token.
var ErrMissingProof = errors.New("fencegrpc: no " + MetadataKey + " metadata")

// UnaryServerInterceptor verifies each call's proof with v before the
// handler runs and puts the verified token in the handler's context
// (Token). A call without a proof, or whose proof fails, is answered
// codes.Unauthenticated (with an ErrorInfo, reason MISSING_PROOF or
// INVALID_PROOF; several proofs are INVALID_PROOF, counted by
// Verifier.Refused) and the handler is not called, so no gate is touched.
func UnaryServerInterceptor(v *fencetoken.Verifier, opts ...ServerOption) grpc.UnaryServerInterceptor {
	c := newServerConfig(v, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := c.verify(ctx, v, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the proof
// is checked once, from the stream's headers, before the handler runs.
func StreamServerInterceptor(v *fencetoken.Verifier, opts ...ServerOption) grpc.StreamServerInterceptor {
	c := newServerConfig(v, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := c.verify(ss.Context(), v, info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, verifiedStream{ServerStream: ss, ctx: ctx})
	}
}

func newServerConfig(v *fencetoken.Verifier, opts []ServerOption) *serverConfig {
	if v == nil {
		panic("fencegrpc: a server interceptor with a nil Verifier")
	}
	c := &serverConfig{}
	for _, o := range opts {
		o(c)
	}
	return c
}

// verify returns ctx with the verified token, or the Unauthenticated status
// to answer.
func (c *serverConfig) verify(ctx context.Context, v *fencetoken.Verifier, method string) (context.Context, error) {
	t, reason, err := verifyMetadata(ctx, v)
	if err == nil {
		return fencetoken.ContextWithToken(ctx, t), nil
	}
	if c.refused != nil {
		c.refused(RefusedInfo{Ctx: ctx, FullMethod: method, Err: err})
	}
	st, derr := status.New(codes.Unauthenticated, err.Error()).WithDetails(&errdetails.ErrorInfo{Domain: Domain, Reason: reason})
	if derr != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	return nil, st.Err()
}

func verifyMetadata(ctx context.Context, v *fencetoken.Verifier) (leasefence.Token, string, error) {
	// Only the one key: FromIncomingContext would copy every header.
	proofs := metadata.ValueFromIncomingContext(ctx, MetadataKey)
	if len(proofs) == 0 || (len(proofs) == 1 && proofs[0] == "") {
		return leasefence.Token{}, ReasonMissingProof, ErrMissingProof
	}
	t, err := v.VerifyOne(proofs)
	if err != nil {
		return leasefence.Token{}, ReasonInvalidProof, fmt.Errorf("fencegrpc: %s: %w", MetadataKey, err)
	}
	return t, "", nil
}

// verifiedStream is a server stream whose context carries the verified
// token.
type verifiedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s verifiedStream) Context() context.Context { return s.ctx }
