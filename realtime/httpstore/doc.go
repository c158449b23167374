// Package httpstore is the real-time runner's store http: each resource a
// real HTTP server of its own on a loopback port, fencehttp.Require in
// front of an in-memory gate (realtime.MemoryResource), the coordinator
// signing each grant's proof with the store's key (HTTPStore.Signer). The
// scenario's forgers' proofs are made up here too (HTTPStore.Forge, a
// realtime.ForgingStore), so that the runner's core knows no proof. It
// registers itself with the registry when linked (realtime/adapters links
// it). The delay a write meets on the wire is the runner's fault layer's
// (realtime.WithWireDelay); its transport holds each request that long.
package httpstore
