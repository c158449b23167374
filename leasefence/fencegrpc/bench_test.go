package fencegrpc_test

import (
	"testing"

	"github.com/leasefence/lab/leasefence/fencegrpc"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// The cost of the server interceptor on a unary round trip, one call at a
// time over one client connection (in memory, bufconn: no kernel in the
// way, so the interceptor's share looks as large as it can), each a write
// committed through the gate:
//
//   - Bare: no interceptor; the handler commits under the token as sent.
//
//   - FirstProof: every call verified afresh (cache off): one Ed25519
//     verification, as for the first call under a lease.
//
//   - RepeatedProof: later calls under the same proof, answered by the
//     verifier's cache.
//
//     go test -run '^$' -bench RoundTrip -benchmem -count 6 ./leasefence/fencegrpc
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name      string
		intercept bool
		opts      []fencetoken.Option
	}{
		{"Bare", false, nil},
		{"FirstProof", true, []fencetoken.Option{fencetoken.WithCacheSize(0)}},
		{"RepeatedProof", true, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := startWorld(b, bc.intercept, bc.opts...)
			lease := w.lease(b, "agent-a", 1)
			if !bc.intercept {
				w.svc.trusted = &lease.Token
			}
			ctx := fencegrpc.WithLease(b.Context(), lease)
			b.ReportAllocs()
			for b.Loop() {
				if err := w.write(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if n := w.svc.writes.Load(); n == 0 {
				b.Fatal("no write was admitted")
			}
		})
	}
}
