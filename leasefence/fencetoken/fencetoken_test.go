package fencetoken_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

const issuer = "coordinators.example"

var testToken = leasefence.Token{Resource: "deploy/prod", Holder: "agent-a", Fence: 42}

type keyPair struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newKey(t testing.TB) keyPair {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{pub, priv}
}

func newSigner(t testing.TB, k keyPair, kid, iss string) *fencetoken.Signer {
	t.Helper()
	s, err := fencetoken.NewSigner(k.priv, kid, iss)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newVerifier(t testing.TB, keys map[string]ed25519.PublicKey, opts ...fencetoken.Option) *fencetoken.Verifier {
	t.Helper()
	v, err := fencetoken.NewVerifier(issuer, keys, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func prove(t testing.TB, s *fencetoken.Signer, tok leasefence.Token) string {
	t.Helper()
	p, err := s.Prove(tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// craft signs claims with method and key under header, as a forger or a
// careless signer would; kid "" leaves the kid out.
func craft(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func goodClaims() jwt.MapClaims {
	return jwt.MapClaims{"iss": issuer, "sub": "agent-a", "lf_res": "deploy/prod", "lf_fence": "42", "iat": 1}
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	c[k] = v
	return c
}

func without(c jwt.MapClaims, k string) jwt.MapClaims {
	delete(c, k)
	return c
}

func TestSignedProofVerifies(t *testing.T) {
	k := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	for _, tok := range []leasefence.Token{testToken, {Resource: "r", Holder: "h", Fence: 1}, {Resource: "r", Holder: "h", Fence: ^leasefence.Fence(0)}} {
		got, err := v.Verify(prove(t, newSigner(t, k, "k1", issuer), tok))
		if err != nil || got != tok {
			t.Errorf("Verify(Prove(%v)) = %v, %v", tok, got, err)
		}
	}
	if n := v.Refused(); n != 0 {
		t.Fatalf("Refused = %d after genuine proofs", n)
	}
}

// The claims are those the package doc names, the fence a decimal string.
func TestProofClaims(t *testing.T) {
	k := newKey(t)
	p := prove(t, newSigner(t, k, "k1", issuer), leasefence.Token{Resource: "r", Holder: "h", Fence: ^leasefence.Fence(0)})
	var c jwt.MapClaims
	tok, err := jwt.ParseWithClaims(p, &c, func(*jwt.Token) (any, error) { return k.pub, nil })
	if err != nil {
		t.Fatal(err)
	}
	if tok.Header["alg"] != "EdDSA" || tok.Header["kid"] != "k1" {
		t.Fatalf("header %v", tok.Header)
	}
	if c["iss"] != issuer || c["sub"] != "h" || c["lf_res"] != "r" || c["lf_fence"] != "18446744073709551615" {
		t.Fatalf("claims %v", c)
	}
	if _, ok := c["exp"]; ok {
		t.Fatalf("a proof carries exp: %v", c)
	}
}

func TestVerifyRefuses(t *testing.T) {
	k, forger := newKey(t), newKey(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	genuine := prove(t, newSigner(t, k, "k1", issuer), testToken)
	parts := strings.Split(genuine, ".")
	otherPayload := strings.Split(prove(t, newSigner(t, k, "k1", issuer), leasefence.Token{Resource: "deploy/prod", Holder: "agent-a", Fence: 43}), ".")[1]
	flipped := []byte(parts[2])
	flipped[3] = "AB"[b2i(flipped[3] == 'A')] // another base64url digit
	for _, tc := range []struct {
		name, proof string
	}{
		{"empty", ""},
		{"not a JWS", "hello"},
		{"two segments", parts[0] + "." + parts[1]},
		{"four segments", genuine + ".x"},
		{"alg none", craft(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "k1", goodClaims())},
		{"alg none, signature kept", strings.Join([]string{base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)), parts[1], parts[2]}, ".")},
		{"HMAC with the public key as secret", craft(t, jwt.SigningMethodHS256, []byte(k.pub), "k1", goodClaims())},
		{"ES256 under a known kid", craft(t, jwt.SigningMethodES256, ec, "k1", goodClaims())},
		{"signed by another key under a known kid", craft(t, jwt.SigningMethodEdDSA, forger.priv, "k1", goodClaims())},
		{"unknown kid", craft(t, jwt.SigningMethodEdDSA, forger.priv, "k9", goodClaims())},
		{"missing kid", craft(t, jwt.SigningMethodEdDSA, k.priv, "", goodClaims())},
		{"kid not a string", strings.Join([]string{base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":1}`)), parts[1], parts[2]}, ".")},
		{"wrong issuer", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "iss", "someone.else"))},
		{"no issuer", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", without(goodClaims(), "iss"))},
		{"fence a JSON number", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", 42))},
		{"fence with a leading zero", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", "042"))},
		{"fence 0", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", "0"))},
		{"fence out of range", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", "18446744073709551616"))},
		{"fence negative", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", "-1"))},
		{"fence with a sign", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", "+42"))},
		{"fence with a space", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", "42 "))},
		{"fence in hex", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", "0x2a"))},
		{"fence empty", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", ""))},
		{"fence null", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "lf_fence", nil))},
		{"no fence", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", without(goodClaims(), "lf_fence"))},
		{"no sub", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", without(goodClaims(), "sub"))},
		{"empty sub", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "sub", ""))},
		{"no lf_res", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", without(goodClaims(), "lf_res"))},
		{"sub not a string", craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", with(goodClaims(), "sub", 7))},
		{"tampered signature", parts[0] + "." + parts[1] + "." + string(flipped)},
		{"tampered claims", parts[0] + "." + otherPayload + "." + parts[2]},
		{"signature removed", parts[0] + "." + parts[1] + "."},
		{"padded base64", genuine + "=="},
		{"too long", genuine + strings.Repeat("A", fencetoken.MaxProofLength)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
			for i := range 2 { // a refusal is never cached
				got, err := v.Verify(tc.proof)
				if !errors.Is(err, fencetoken.ErrInvalid) {
					t.Fatalf("Verify = %v, %v; want an error wrapping ErrInvalid", got, err)
				}
				if got != (leasefence.Token{}) {
					t.Fatalf("a refusal returned token %v", got)
				}
				if n := v.Refused(); n != uint64(i+1) {
					t.Fatalf("Refused = %d after %d refusals", n, i+1)
				}
			}
			if _, err := v.Verify(tc.proof); !strings.Contains(err.Error(), refusedFor[tc.name]) {
				t.Fatalf("refused for %q, want a refusal naming %q", err, refusedFor[tc.name])
			}
		})
	}
}

// refusedFor is what each refusal in TestVerifyRefuses must name, so that a
// proof refused for the wrong reason (the right reason's check missing)
// fails the test.
var refusedFor = map[string]string{
	"empty":                              "malformed",
	"not a JWS":                          "malformed",
	"two segments":                       "malformed",
	"four segments":                      "malformed",
	"alg none":                           "signing method none is invalid",
	"alg none, signature kept":           "signing method none is invalid",
	"HMAC with the public key as secret": "signing method HS256 is invalid",
	"ES256 under a known kid":            "signing method ES256 is invalid",
	"signed by another key under a known kid": "verification error",
	"unknown kid":               `unknown kid "k9"`,
	"missing kid":               "no kid",
	"kid not a string":          "no kid",
	"wrong issuer":              "invalid issuer",
	"no issuer":                 "iss claim is required",
	"fence a JSON number":       "lf_fence is 42, not a decimal string",
	"fence with a leading zero": "leading zero",
	"fence 0":                   "leading zero",
	"fence out of range":        "out of range",
	"fence negative":            "not decimal digits",
	"fence with a sign":         "not decimal digits",
	"fence with a space":        "not decimal digits",
	"fence in hex":              "leading zero",
	"fence empty":               "is empty",
	"fence null":                "is empty",
	"no fence":                  "no lf_fence",
	"no sub":                    "no sub",
	"empty sub":                 "no sub",
	"no lf_res":                 "no lf_res",
	"sub not a string":          "claim sub is 7, not a string",
	"tampered signature":        "verification error",
	"tampered claims":           "verification error",
	"signature removed":         "verification error",
	"padded base64":             "base64",
}

// Verify ignores iat, whatever it holds, and claims it does not know; a
// proof has no expiry, so an exp is not a reason either way.
func TestVerifyIgnores(t *testing.T) {
	k := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	for name, c := range map[string]jwt.MapClaims{
		"iat a string":    with(goodClaims(), "iat", "yesterday"),
		"no iat":          without(goodClaims(), "iat"),
		"iat in a decade": with(goodClaims(), "iat", 2_000_000_000),
		"unknown claim":   with(goodClaims(), "lf_colour", "blue"),
		"audience":        with(goodClaims(), "aud", "somewhere"),
	} {
		if got, err := v.Verify(craft(t, jwt.SigningMethodEdDSA, k.priv, "k1", c)); err != nil || got != testToken {
			t.Errorf("%s: Verify = %v, %v; want %v", name, got, err, testToken)
		}
	}
}

// Rotation: a verifier with both keys accepts proofs under either; once the
// old key is dropped, its proofs are refused.
func TestKeyRotation(t *testing.T) {
	old, next := newKey(t), newKey(t)
	oldProof := prove(t, newSigner(t, old, "2026-01", issuer), testToken)
	newProof := prove(t, newSigner(t, next, "2026-02", issuer), testToken)
	both := newVerifier(t, map[string]ed25519.PublicKey{"2026-01": old.pub, "2026-02": next.pub})
	for _, p := range []string{oldProof, newProof} {
		if got, err := both.Verify(p); err != nil || got != testToken {
			t.Fatalf("during rotation: Verify = %v, %v", got, err)
		}
	}
	after := newVerifier(t, map[string]ed25519.PublicKey{"2026-02": next.pub})
	if _, err := after.Verify(oldProof); !errors.Is(err, fencetoken.ErrInvalid) {
		t.Fatalf("after rotation, the old key's proof: %v", err)
	}
	if got, err := after.Verify(newProof); err != nil || got != testToken {
		t.Fatalf("after rotation, the new key's proof: %v, %v", got, err)
	}
}

// A cache hit is as strict as a miss: the same proof with one character
// changed is checked again, and refused.
func TestCacheIsExactlyAsStrict(t *testing.T) {
	k := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub}, fencetoken.WithCacheSize(4))
	p := prove(t, newSigner(t, k, "k1", issuer), testToken)
	for range 3 {
		if got, err := v.Verify(p); err != nil || got != testToken {
			t.Fatalf("Verify = %v, %v", got, err)
		}
	}
	other := "A"
	if p[len(p)-2] == 'A' {
		other = "B"
	}
	tampered := p[:len(p)-2] + other + p[len(p)-1:]
	if _, err := v.Verify(tampered); !errors.Is(err, fencetoken.ErrInvalid) {
		t.Fatalf("a tampered copy of a cached proof: %v", err)
	}
}

func TestConcurrentVerify(t *testing.T) {
	k := newKey(t)
	s := newSigner(t, k, "k1", issuer)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub}, fencetoken.WithCacheSize(8))
	var proofs []string
	for f := range 32 {
		proofs = append(proofs, prove(t, s, leasefence.Token{Resource: "r", Holder: "h", Fence: leasefence.Fence(f + 1)}))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				f := (g + i) % len(proofs)
				got, err := v.Verify(proofs[f])
				if err != nil || got.Fence != leasefence.Fence(f+1) {
					t.Errorf("Verify = %v, %v", got, err)
					return
				}
				if _, err := v.Verify("forged"); err == nil {
					t.Error("a forgery verified")
					return
				}
			}
		})
	}
	wg.Wait()
	if n := v.Refused(); n != 8*200 {
		t.Fatalf("Refused = %d, want %d", n, 8*200)
	}
}

func TestConstructorsRefuse(t *testing.T) {
	k := newKey(t)
	for name, f := range map[string]func() error{
		"short private key": func() error { _, err := fencetoken.NewSigner(k.priv[:10], "k", issuer); return err },
		"empty kid":         func() error { _, err := fencetoken.NewSigner(k.priv, "", issuer); return err },
		"empty issuer":      func() error { _, err := fencetoken.NewSigner(k.priv, "k", ""); return err },
		"no keys":           func() error { _, err := fencetoken.NewVerifier(issuer, nil); return err },
		"verifier issuer": func() error {
			_, err := fencetoken.NewVerifier("", map[string]ed25519.PublicKey{"k": k.pub})
			return err
		},
		"verifier kid": func() error {
			_, err := fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"": k.pub})
			return err
		},
		"short public key": func() error {
			_, err := fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"k": k.pub[:5]})
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := newSigner(t, k, "k", issuer)
	for _, tok := range []leasefence.Token{{Holder: "h", Fence: 1}, {Resource: "r", Fence: 1}, {Resource: "r", Holder: "h"}} {
		if p, err := s.Prove(tok); err == nil {
			t.Errorf("Prove(%v) = %q, want an error", tok, p)
		}
	}
}

// The verifier copies its keys: changing the caller's map changes nothing.
func TestVerifierCopiesKeys(t *testing.T) {
	k, forger := newKey(t), newKey(t)
	keys := map[string]ed25519.PublicKey{"k1": k.pub}
	v := newVerifier(t, keys)
	keys["k1"] = forger.pub
	if _, err := v.Verify(prove(t, newSigner(t, forger, "k1", issuer), testToken)); !errors.Is(err, fencetoken.ErrInvalid) {
		t.Fatalf("a key swapped into the caller's map was used: %v", err)
	}
}
