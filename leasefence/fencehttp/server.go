package fencehttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// Options configures RequireWith.
type Options struct {
	// Refused, if non-nil, is called for every request Require answers
	// itself, before the answer is written: a tracing or metrics hook (the
	// count of failed verifications is also Verifier.Refused). It runs on
	// the request's goroutine and must not write to the response.
	Refused func(RefusedInfo)
}

// RefusedInfo describes a request Require refused.
type RefusedInfo struct {
	Request *http.Request
	// Status is 428 for a request without a proof, 401 for a proof that
	// failed verification.
	Status int
	// Err says why: ErrMissingProof, or an error wrapping
	// fencetoken.ErrInvalid.
	Err error
}

// ErrMissingProof is RefusedInfo.Err for a request without a Fence-Token.
var ErrMissingProof = errors.New("fencehttp: no " + Header + " header")

// Require returns middleware that verifies each request's proof with v
// before calling the handler, and puts the verified token in the request's
// context (Token). A request without the header, or with an empty one, is
// answered 428 Precondition Required; one whose proof fails verification
// (or that carries several) 401 Unauthorized; either way the handler is not
// called, so no gate is touched. Both answers are RFC 9457 problem details.
//
// A genuine proof for another resource verifies: the handler's gate refuses
// it with leasefence.ErrWrongResource (not logged, floor untouched), and the
// handler answers it, 403 being right.
func Require(v *fencetoken.Verifier) func(http.Handler) http.Handler {
	return RequireWith(v, Options{})
}

// RequireWith is Require with options.
func RequireWith(v *fencetoken.Verifier, opts Options) func(http.Handler) http.Handler {
	if v == nil {
		panic("fencehttp: Require with a nil Verifier")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t, status, err := verifyRequest(v, r)
			if err != nil {
				if opts.Refused != nil {
					opts.Refused(RefusedInfo{Request: r, Status: status, Err: err})
				}
				writeUnverified(w, status, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(fencetoken.ContextWithToken(r.Context(), t)))
		})
	}
}

func verifyRequest(v *fencetoken.Verifier, r *http.Request) (leasefence.Token, int, error) {
	proofs := r.Header.Values(Header)
	if len(proofs) == 0 || (len(proofs) == 1 && proofs[0] == "") {
		return leasefence.Token{}, http.StatusPreconditionRequired, ErrMissingProof
	}
	t, err := v.VerifyOne(proofs)
	if err != nil {
		return leasefence.Token{}, http.StatusUnauthorized, fmt.Errorf("fencehttp: %s: %w", Header, err)
	}
	return t, 0, nil
}

// Token returns the token Require verified for the request whose context
// is ctx.
func Token(ctx context.Context) (leasefence.Token, bool) {
	return fencetoken.TokenFromContext(ctx)
}
