// Package fencehttp carries a lease's proof in an HTTP header and a gate's
// refusal back as the same typed error, so that a resource behind an HTTP
// API fences its writes like one in the same process.
//
// The client puts its lease in the request's context (WithLease), and
// Transport stamps the proof in the Fence-Token header. The server wraps
// its handler in Require, which verifies the proof before the handler runs
// (428 Precondition Required without one, 401 Unauthorized for one that
// fails: a forged or tampered proof never reaches a gate, so it can neither
// raise a floor nor fill the refusal log) and hands the handler the
// verified token (Token). The handler commits through whatever gate guards
// its data, and answers a refusal with WriteError: 409 Conflict with an RFC
// 9457 problem body naming both holders, both fences and the refusal's
// sequence number. Refusal turns that answer back into the gate's
// *leasefence.StaleFenceError (or *leasefence.TokenConflictError) on the
// client, so errors.As works across the wire.
//
// The package uses net/http and the standard library only; tracing hooks
// in (Options.Refused) without this package importing a tracing library.
package fencehttp
