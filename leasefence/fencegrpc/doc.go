// Package fencegrpc carries a lease's proof in gRPC metadata and a gate's
// refusal back as the same typed error: what fencehttp does for HTTP.
//
// The client puts its lease in the call's context (WithLease; the key is
// shared with fencehttp) and the client interceptors stamp its proof under
// the metadata key fence-token. The server interceptors verify it before
// the handler runs, answering codes.Unauthenticated for a missing or
// failing proof (a forged or tampered proof never reaches a gate), and hand
// the handler the verified token (Token). The handler commits through its
// gate and returns Status(err): a refusal becomes codes.FailedPrecondition
// with an errdetails.ErrorInfo (domain "leasefence", reason "STALE_FENCE" or
// "TOKEN_CONFLICT", metadata resource, holder, fence, floor_holder,
// floor_fence and seq, the numbers in decimal), which Refusal turns back
// into the *leasefence.StaleFenceError or *leasefence.TokenConflictError on
// the client.
package fencegrpc
