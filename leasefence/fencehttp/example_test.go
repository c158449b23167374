package fencehttp_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencehttp"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// A deploy service behind HTTP fences its writes: the coordinator signs
// each grant, the service verifies the proof before its handler runs and
// commits through its gate, and a stale holder's write comes back as the
// gate's *leasefence.StaleFenceError.
func Example() {
	pub, priv, err := ed25519.GenerateKey(rand.Reader) // the coordinators' key; the service gets pub
	if err != nil {
		log.Fatal(err)
	}
	signer, err := fencetoken.NewSigner(priv, "2026-12", "coordinators.example")
	if err != nil {
		log.Fatal(err)
	}
	clock := leasefence.NewManualClock("coordinator")
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: 10 * time.Second, Prover: signer})
	if err != nil {
		log.Fatal(err)
	}

	// The server: Require verifies the Fence-Token header; the handler
	// commits under the verified token and answers a refusal with 409.
	verifier, err := fencetoken.NewVerifier("coordinators.example", map[string]ed25519.PublicKey{"2026-12": pub})
	if err != nil {
		log.Fatal(err)
	}
	gate := leasefence.NewFenceGate("deploy/prod")
	deploy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fencehttp.Token(r.Context())
		err := gate.Commit(r.Context(), tok, func(ctx context.Context) error {
			return nil // the write itself: a database row, a file, a release
		})
		switch {
		case err == nil:
			w.WriteHeader(http.StatusNoContent)
		case fencehttp.WriteError(w, err): // 409, problem+json
		case errors.Is(err, leasefence.ErrWrongResource):
			http.Error(w, err.Error(), http.StatusForbidden)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	srv := httptest.NewServer(fencehttp.Require(verifier)(deploy))
	defer srv.Close()

	// The client: the Transport stamps the proof of the lease in the
	// request's context; Refusal turns a 409 back into the gate's error.
	client := &http.Client{Transport: fencehttp.Transport{}}
	write := func(lease *leasefence.Lease) error {
		ctx := fencehttp.WithLease(context.Background(), *lease)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/deploy", strings.NewReader("v2"))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := fencehttp.Refusal(resp); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("deploy: %s", resp.Status)
		}
		return nil
	}
	acquire := func(holder string) *leasefence.Lease {
		c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewManualClock(leasefence.Domain(holder)), Holder: holder})
		if err != nil {
			log.Fatal(err)
		}
		req, err := c.BeginAcquire("deploy/prod")
		if err != nil {
			log.Fatal(err)
		}
		out, err := coord.Acquire(req)
		if err != nil || !out.OK {
			log.Fatal(out, err)
		}
		lease, err := c.CompleteAcquire(req, out.Grant)
		if err != nil {
			log.Fatal(err)
		}
		return lease
	}

	a := acquire("agent-a")
	clock.Advance(11 * time.Second) // agent-a stalls past its lease
	b := acquire("agent-b")
	fmt.Println("agent-b:", write(b))

	err = write(a) // agent-a wakes up and writes under its old lease
	var stale *leasefence.StaleFenceError
	if errors.As(err, &stale) {
		fmt.Printf("agent-a refused: fence %d, floor %s@%d (refusal %d)\n", stale.Fence, stale.FloorHolder, stale.FloorFence, stale.Seq)
	}

	resp, err := http.Post(srv.URL+"/deploy", "text/plain", strings.NewReader("v3")) // no proof
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("without a proof:", resp.Status)
	// Output:
	// agent-b: <nil>
	// agent-a refused: fence 1, floor agent-b@2 (refusal 1)
	// without a proof: 428 Precondition Required
}

// RequireWith's Refused hook sees every request Require answers itself: the
// place for a metric or a span event (with the request's context), since a
// rising count means someone presents proofs the coordinator never minted.
func ExampleRequireWith() {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	verifier, err := fencetoken.NewVerifier("coordinators.example", map[string]ed25519.PublicKey{"2026-12": pub})
	if err != nil {
		log.Fatal(err)
	}
	var missing, forged atomic.Int64 // the hook runs on the server's goroutines
	require := fencehttp.RequireWith(verifier, fencehttp.Options{Refused: func(i fencehttp.RefusedInfo) {
		if errors.Is(i.Err, fencetoken.ErrInvalid) {
			forged.Add(1) // e.g. trace.SpanFromContext(i.Request.Context()).AddEvent("forged fence proof")
		} else {
			missing.Add(1)
		}
	}})
	srv := httptest.NewServer(require(http.NotFoundHandler()))
	defer srv.Close()

	for _, proof := range []string{"", "made.up.proof"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set(fencehttp.Header, proof)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	fmt.Println("missing:", missing.Load(), "forged:", forged.Load(), "refused by the verifier:", verifier.Refused())
	// Output:
	// 428 Precondition Required
	// 401 Unauthorized
	// missing: 1 forged: 1 refused by the verifier: 1
}
