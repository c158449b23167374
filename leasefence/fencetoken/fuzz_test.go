package fencetoken_test

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// fuzzKey is fixed so that the corpus's genuine proofs stay genuine.
var fuzzKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

// FuzzVerify: whatever the input, Verify either refuses it with ErrInvalid,
// counted, or returns a token a coordinator could have issued; and asked
// again it answers the same (the cache changes nothing). Only the signer's
// own proofs are accepted: a mutation of one is refused unless it is the
// same proof.
func FuzzVerify(f *testing.F) {
	s, err := fencetoken.NewSigner(fuzzKey, "k1", issuer)
	if err != nil {
		f.Fatal(err)
	}
	genuine := map[string]leasefence.Token{}
	for _, tok := range []leasefence.Token{testToken, {Resource: "r", Holder: "h", Fence: ^leasefence.Fence(0)}} {
		p, err := s.Prove(tok)
		if err != nil {
			f.Fatal(err)
		}
		genuine[p] = tok
		f.Add(p)
		f.Add(strings.ToUpper(p))
		f.Add(p[:len(p)/2])
		f.Add(p + "\r\n")
	}
	f.Add("")
	f.Add("..")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, proof string) {
		v, err := fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"k1": fuzzKey.Public().(ed25519.PublicKey)})
		if err != nil {
			t.Fatal(err)
		}
		first, err1 := v.Verify(proof)
		second, err2 := v.Verify(proof)
		if first != second || (err1 == nil) != (err2 == nil) {
			t.Fatalf("asked twice: %v, %v then %v, %v", first, err1, second, err2)
		}
		if err1 != nil {
			if !errors.Is(err1, fencetoken.ErrInvalid) || v.Refused() != 2 || first != (leasefence.Token{}) {
				t.Fatalf("refusal %v (token %v) does not wrap ErrInvalid or went uncounted (%d)", err1, first, v.Refused())
			}
			return
		}
		if leasefence.ValidateToken(first) != nil {
			t.Fatalf("accepted a token no coordinator issues: %v", first)
		}
		if strings.Count(proof, ".") != 2 || strings.Trim(proof, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			t.Fatalf("accepted %q, which is not three base64url segments", proof)
		}
		if want, ok := genuine[proof]; ok && want != first {
			t.Fatalf("a genuine proof verified as %v, want %v", first, want)
		}
	})
}

// FuzzProve: a token with valid ids is signed, within MaxProofLength, and
// its proof verifies as that token; any other is refused with
// ErrUnsignable. The seeds are the ids JSON writes widest.
func FuzzProve(f *testing.F) {
	s, err := fencetoken.NewSigner(fuzzKey, "k1", issuer)
	if err != nil {
		f.Fatal(err)
	}
	v, err := fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"k1": fuzzKey.Public().(ed25519.PublicKey)}, fencetoken.WithCacheSize(0))
	if err != nil {
		f.Fatal(err)
	}
	for _, id := range widestIDs() {
		f.Add(id, id, uint64(1))
	}
	f.Add("agent-a", "deploy/prod", uint64(42))
	f.Add("agent-a\n", "r", uint64(1))
	f.Add("r", "", ^uint64(0))
	f.Fuzz(func(t *testing.T, holder, resource string, fence uint64) {
		tok := leasefence.Token{Resource: resource, Holder: holder, Fence: leasefence.Fence(fence)}
		p, err := s.Prove(tok)
		if leasefence.ValidateToken(tok) != nil {
			if !errors.Is(err, fencetoken.ErrUnsignable) || p != "" {
				t.Fatalf("Prove(%.60q) of an invalid token = %.40q, %v; want ErrUnsignable", tok, p, err)
			}
			return
		}
		if err != nil || len(p) > fencetoken.MaxProofLength {
			t.Fatalf("Prove(%.60q) = %d bytes, %v; want a proof within MaxProofLength (%d)", tok, len(p), err, fencetoken.MaxProofLength)
		}
		if got, err := v.Verify(p); err != nil || got != tok {
			t.Fatalf("Prove(%.60q) signed, but Verify = %.60q, %v", tok, got, err)
		}
	})
}
