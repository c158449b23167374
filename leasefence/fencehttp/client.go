package fencehttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// Header is the request header that carries a lease's proof.
const Header = "Fence-Token"

// WithLease returns a copy of ctx carrying lease: a request made with it
// through Transport presents lease.Proof. The key is fencetoken's, shared
// with fencegrpc.
func WithLease(ctx context.Context, lease leasefence.Lease) context.Context {
	return fencetoken.ContextWithLease(ctx, lease)
}

// ErrNoProof is returned by Transport for a request whose context carries a
// lease without a proof: the coordinator that granted it has no Prover, and
// the resource would answer 428.
var ErrNoProof = errors.New("fencehttp: the lease has no proof")

// Transport is an http.RoundTripper that stamps the Fence-Token header from
// the lease in each request's context (WithLease); a request without a lease
// passes through untouched. It never changes the caller's request (it sends
// a clone), and returns every response as is: a 409 carrying a refusal
// too, which Refusal turns into the gate's error.
type Transport struct {
	// Base carries the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	lease, ok := fencetoken.LeaseFromContext(req.Context())
	if !ok {
		return base.RoundTrip(req)
	}
	if lease.Proof == "" {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on an error
		}
		return nil, fmt.Errorf("%w: %v", ErrNoProof, lease.Token)
	}
	out := req.Clone(req.Context())
	out.Header.Set(Header, lease.Proof)
	return base.RoundTrip(out)
}

// CloseIdleConnections closes the idle connections of Base, when it keeps
// any, so that http.Client.CloseIdleConnections reaches them through the
// Transport.
func (t Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
