package fencegrpc

import (
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasefence/lab/leasefence"
)

// Domain is the ErrorInfo domain of every status this package makes.
const Domain = "leasefence"

// The ErrorInfo reasons of a refusal.
const (
	ReasonStaleFence    = "STALE_FENCE"
	ReasonTokenConflict = "TOKEN_CONFLICT"
)

// Status turns a gate's refusal into the status a handler returns: if err
// is (or wraps) a *leasefence.StaleFenceError or a
// *leasefence.TokenConflictError, a codes.FailedPrecondition status whose
// errdetails.ErrorInfo has domain "leasefence", reason STALE_FENCE or
// TOKEN_CONFLICT, and metadata resource, holder, fence, floor_holder,
// floor_fence and seq (the numbers in decimal). Status(nil) is nil; any
// other error is returned unchanged.
func Status(err error) error {
	var (
		stale    *leasefence.StaleFenceError
		conflict *leasefence.TokenConflictError
		r        leasefence.Rejection
		reason   string
		msg      string
	)
	switch {
	case errors.As(err, &stale):
		r, reason, msg = stale.Rejection, ReasonStaleFence, stale.Error()
	case errors.As(err, &conflict):
		r, reason, msg = conflict.Rejection, ReasonTokenConflict, conflict.Error()
	default:
		return err
	}
	st, derr := status.New(codes.FailedPrecondition, msg).WithDetails(&errdetails.ErrorInfo{
		Domain: Domain,
		Reason: reason,
		Metadata: map[string]string{
			"resource":     r.Resource,
			"holder":       r.Holder,
			"fence":        strconv.FormatUint(uint64(r.Fence), 10),
			"floor_holder": r.FloorHolder,
			"floor_fence":  strconv.FormatUint(uint64(r.FloorFence), 10),
			"seq":          strconv.FormatUint(r.Seq, 10),
		},
	})
	if derr != nil {
		return status.Error(codes.FailedPrecondition, msg) // ErrorInfo always marshals
	}
	return st.Err()
}

// Refusal turns a status made by Status back into the typed error the
// server's gate returned: a *leasefence.StaleFenceError or a
// *leasefence.TokenConflictError with the gate's Rejection. It is nil for
// any other error, nil included.
func Refusal(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return nil
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != Domain {
			continue
		}
		if r := refusalOf(info); r != nil {
			return r
		}
	}
	return nil
}

func refusalOf(info *errdetails.ErrorInfo) error {
	md := info.GetMetadata()
	fence, err1 := strconv.ParseUint(md["fence"], 10, 64)
	floor, err2 := strconv.ParseUint(md["floor_fence"], 10, 64)
	seq, err3 := strconv.ParseUint(md["seq"], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || md["resource"] == "" || md["holder"] == "" {
		return nil
	}
	r := leasefence.Rejection{
		Seq: seq, Resource: md["resource"], Holder: md["holder"], Fence: leasefence.Fence(fence),
		FloorHolder: md["floor_holder"], FloorFence: leasefence.Fence(floor),
	}
	switch info.GetReason() {
	case ReasonStaleFence:
		return &leasefence.StaleFenceError{Rejection: r}
	case ReasonTokenConflict:
		return &leasefence.TokenConflictError{Rejection: r}
	}
	return nil
}
