package fencetoken_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// The coordinator signs each grant; the resource verifies the proof with
// the public key alone, and refuses one a caller made up.
func Example() {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	signer, err := fencetoken.NewSigner(priv, "2026-12", "coordinators.example")
	if err != nil {
		panic(err)
	}
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: leasefence.NewMonotonicClock("coordinator"), TTL: 10e9, Prover: signer,
	})
	if err != nil {
		panic(err)
	}
	out, err := coord.Acquire(leasefence.AcquireRequest{RequestID: "r1", Holder: "agent-a", Resource: "deploy/prod"})
	if err != nil {
		panic(err)
	}

	verifier, err := fencetoken.NewVerifier("coordinators.example", map[string]ed25519.PublicKey{"2026-12": pub})
	if err != nil {
		panic(err)
	}
	tok, err := verifier.Verify(out.Grant.Proof)
	fmt.Println(tok, err)

	_, forgerKey, _ := ed25519.GenerateKey(rand.Reader)
	forger, _ := fencetoken.NewSigner(forgerKey, "2026-12", "coordinators.example")
	forged, _ := forger.Prove(leasefence.Token{Resource: "deploy/prod", Holder: "mallory", Fence: 1 << 63})
	_, err = verifier.Verify(forged)
	fmt.Println(errors.Is(err, fencetoken.ErrInvalid), verifier.Refused())
	// Output:
	// agent-a@1 on "deploy/prod" <nil>
	// true 1
}
