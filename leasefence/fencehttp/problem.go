package fencehttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/leasefence/lab/leasefence"
)

// The problem types (RFC 9457) this package writes.
const (
	TypeStaleFence    = "urn:leasefence:stale-fence"
	TypeTokenConflict = "urn:leasefence:token-conflict"
	TypeMissingProof  = "urn:leasefence:missing-proof"
	TypeInvalidProof  = "urn:leasefence:invalid-proof"
)

// ProblemContentType is the media type of an RFC 9457 problem body.
const ProblemContentType = "application/problem+json"

// maxProblem bounds the body Refusal reads: a refusal's is some hundreds of
// bytes.
const maxProblem = 64 << 10

// problem is an RFC 9457 body. A refusal's members are all strings: the
// fences and the sequence number in decimal, since a uint64 does not
// survive a JSON number in most languages.
type problem struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Detail      string `json:"detail"`
	Resource    string `json:"resource,omitempty"`
	Holder      string `json:"holder,omitempty"`
	Fence       string `json:"fence,omitempty"`
	FloorHolder string `json:"floor_holder,omitempty"`
	FloorFence  string `json:"floor_fence,omitempty"`
	Seq         string `json:"seq,omitempty"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a struct of strings and an int always marshals
	}
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

func writeUnverified(w http.ResponseWriter, status int, err error) {
	p := problem{Type: TypeInvalidProof, Title: "Invalid fence proof", Status: status, Detail: err.Error()}
	if status == http.StatusPreconditionRequired {
		p.Type, p.Title = TypeMissingProof, "Fence proof required"
	} else {
		w.Header().Set("WWW-Authenticate", Header+` error="invalid_token"`)
	}
	writeProblem(w, p)
}

// WriteError answers a gate's refusal: if err is (or wraps) a
// *leasefence.StaleFenceError or a *leasefence.TokenConflictError, it writes
// 409 Conflict with an RFC 9457 body (Content-Type application/problem+json)
// whose type is TypeStaleFence or TypeTokenConflict and whose members
// resource, holder, fence, floor_holder, floor_fence and seq are the
// refusal's, the numbers as decimal strings, and returns true. For any
// other error (leasefence.ErrWrongResource included) it writes nothing and
// returns false.
func WriteError(w http.ResponseWriter, err error) bool {
	p, ok := refusalProblem(err)
	if ok {
		writeProblem(w, p)
	}
	return ok
}

func refusalProblem(err error) (problem, bool) {
	var (
		stale    *leasefence.StaleFenceError
		conflict *leasefence.TokenConflictError
		r        leasefence.Rejection
		p        = problem{Status: http.StatusConflict}
	)
	switch {
	case errors.As(err, &stale):
		r, p.Type, p.Title, p.Detail = stale.Rejection, TypeStaleFence, "Stale fence", stale.Error()
	case errors.As(err, &conflict):
		r, p.Type, p.Title, p.Detail = conflict.Rejection, TypeTokenConflict, "Token conflict", conflict.Error()
	default:
		return problem{}, false
	}
	p.Resource, p.Holder, p.FloorHolder = r.Resource, r.Holder, r.FloorHolder
	p.Fence = strconv.FormatUint(uint64(r.Fence), 10)
	p.FloorFence = strconv.FormatUint(uint64(r.FloorFence), 10)
	p.Seq = strconv.FormatUint(r.Seq, 10)
	return p, true
}

// Refusal returns the error the gate refused the request with, if resp is
// WriteError's answer: a *leasefence.StaleFenceError or a
// *leasefence.TokenConflictError with the Rejection the server's gate
// logged. It returns nil for any other response, a 409 that is not one of
// these included. It reads the body and puts it back: resp.Body reads the
// same afterwards, and closing it closes the original.
func Refusal(resp *http.Response) error {
	if resp == nil || resp.StatusCode != http.StatusConflict || resp.Body == nil {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != ProblemContentType {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProblem+1))
	resp.Body = &replayedBody{Reader: io.MultiReader(bytes.NewReader(b), resp.Body), orig: resp.Body}
	if err != nil || len(b) > maxProblem {
		return nil
	}
	var p problem
	if json.Unmarshal(b, &p) != nil {
		return nil
	}
	return p.refusal()
}

// refusal is the typed error p describes, or nil when p is not a refusal
// (another type, or members that are not what WriteError writes).
func (p problem) refusal() error {
	if p.Type != TypeStaleFence && p.Type != TypeTokenConflict {
		return nil
	}
	fence, err1 := strconv.ParseUint(p.Fence, 10, 64)
	floor, err2 := strconv.ParseUint(p.FloorFence, 10, 64)
	seq, err3 := strconv.ParseUint(p.Seq, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || p.Resource == "" || p.Holder == "" {
		return nil
	}
	r := leasefence.Rejection{
		Seq: seq, Resource: p.Resource, Holder: p.Holder, Fence: leasefence.Fence(fence),
		FloorHolder: p.FloorHolder, FloorFence: leasefence.Fence(floor),
	}
	if p.Type == TypeStaleFence {
		return &leasefence.StaleFenceError{Rejection: r}
	}
	return &leasefence.TokenConflictError{Rejection: r}
}

// replayedBody reads what Refusal read, then the rest of the original
// body, and closes the original.
type replayedBody struct {
	io.Reader
	orig io.Closer
}

func (b *replayedBody) Close() error { return b.orig.Close() }
