// Package fencetoken_test checks that proofs are standard JWTs: a JOSE
// library other than the one that signs them verifies them with the public
// key alone, which is what a resource written in another language does.
package fencetoken_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

const issuer = "coordinators.example"

// claims are what a service in any language reads from a proof.
type claims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Resource string `json:"lf_res"`
	Fence    string `json:"lf_fence"`
	IssuedAt int64  `json:"iat"`
}

func TestGoJoseVerifiesAProof(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := fencetoken.NewSigner(priv, "2026-12", issuer)
	if err != nil {
		t.Fatal(err)
	}
	tok := leasefence.Token{Resource: "deploy/prod", Holder: "agent-a", Fence: ^leasefence.Fence(0)}
	proof, err := signer.Prove(tok)
	if err != nil {
		t.Fatal(err)
	}

	// As a JWS: header and payload.
	jws, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	if h := jws.Signatures[0].Header; h.Algorithm != "EdDSA" || h.KeyID != "2026-12" {
		t.Fatalf("header %+v", h)
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		t.Fatalf("go-jose refuses the proof: %v", err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	if c.Issuer != issuer || c.Subject != "agent-a" || c.Resource != "deploy/prod" || c.Fence != "18446744073709551615" || c.IssuedAt == 0 {
		t.Fatalf("claims %+v", c)
	}

	// As a JWT, with its registered claims validated.
	jt, err := josejwt.ParseSigned(proof, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var std josejwt.Claims
	var own claims
	if err := jt.Claims(pub, &std, &own); err != nil {
		t.Fatal(err)
	}
	if err := std.Validate(josejwt.Expected{Issuer: issuer, Subject: "agent-a"}); err != nil {
		t.Fatalf("go-jose validation: %v", err)
	}

	// And go-jose refuses it under another key.
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := jws.Verify(other); err == nil {
		t.Fatal("go-jose verified the proof with another key")
	}
}

// A proof written by go-jose with the coordinators' key, as a signer in
// another language would write it, verifies with fencetoken: the format is
// the standard's, not this library's.
func TestFencetokenVerifiesAGoJoseProof(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "2026-12"))
	if err != nil {
		t.Fatal(err)
	}
	proof, err := josejwt.Signed(sig).Claims(claims{Issuer: issuer, Subject: "agent-b", Resource: "tickets", Fence: "7"}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	v, err := fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"2026-12": pub})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(proof)
	if want := (leasefence.Token{Resource: "tickets", Holder: "agent-b", Fence: 7}); err != nil || got != want {
		t.Fatalf("Verify = %v, %v; want %v", got, err, want)
	}
}
