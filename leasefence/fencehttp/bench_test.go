package fencehttp_test

import (
	"context"
	"crypto/ed25519"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leasefence/lab/leasefence/fencehttp"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// The cost of Require on a loopback round trip, one request at a time over
// a kept-alive connection, each a write committed through the gate:
//
//   - Bare: the handler alone (the proof is sent, nobody checks it).
//
//   - FirstProof: every request verified afresh (cache off): one Ed25519
//     verification, as for the first request under a lease.
//
//   - RepeatedProof: later requests under the same proof, answered by the
//     verifier's cache.
//
//     go test -run '^$' -bench RoundTrip -benchmem -count 6 ./leasefence/fencehttp
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name    string
		require bool
		opts    []fencetoken.Option
	}{
		{"Bare", false, nil},
		{"FirstProof", true, []fencetoken.Option{fencetoken.WithCacheSize(0)}},
		{"RepeatedProof", true, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := newWorld(b, bc.opts...)
			lease := w.lease(b, "agent-a", 1)
			h := http.Handler(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				tok, ok := fencehttp.Token(r.Context())
				if !ok {
					tok = lease.Token // bare: trusted as sent
				}
				if err := w.gate.Commit(r.Context(), tok, func(context.Context) error { return nil }); err != nil {
					fencehttp.WriteError(rw, err)
					return
				}
				rw.WriteHeader(http.StatusNoContent)
			}))
			if bc.require {
				h = fencehttp.Require(w.verifier)(h)
			}
			srv := httptest.NewServer(h)
			b.Cleanup(srv.Close)
			client := &http.Client{Transport: fencehttp.Transport{Base: srv.Client().Transport}}
			ctx := fencehttp.WithLease(b.Context(), lease)
			for b.Loop() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("v"))
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// Verify alone: a signature check against a cache hit.
func BenchmarkVerify(b *testing.B) {
	w := newWorld(b)
	proof := w.lease(b, "agent-a", 1).Proof
	for _, bc := range []struct {
		name string
		opts []fencetoken.Option
	}{{"Signature", []fencetoken.Option{fencetoken.WithCacheSize(0)}}, {"Cached", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			v, err := fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"k1": w.pub}, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := v.Verify(proof); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
