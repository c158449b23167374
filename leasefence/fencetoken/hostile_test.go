package fencetoken_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// signRaw signs payload, a JSON text given byte for byte, under an EdDSA
// header naming kid: what a signer that wrote its own JSON would produce.
func signRaw(priv ed25519.PrivateKey, kid, payload string) string {
	enc := base64.RawURLEncoding
	input := enc.EncodeToString([]byte(`{"alg":"EdDSA","kid":"`+kid+`","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	return input + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(input)))
}

// Every proof a Signer makes verifies: a token whose proof would be longer
// than MaxProofLength (JSON writes '<', '>' and '&' as six bytes each) is
// refused by Prove with ErrUnsignable, so the grant fails instead of an
// honest holder being counted as a forger.
func TestProveRefusesWhatVerifyWould(t *testing.T) {
	k := newKey(t)
	s := newSigner(t, k, "k1", issuer)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	for _, tok := range []leasefence.Token{
		{Resource: "r", Holder: strings.Repeat("<", leasefence.MaxIDLen), Fence: 1},
		{Resource: strings.Repeat("&", leasefence.MaxIDLen), Holder: "h", Fence: 1},
		{Resource: strings.Repeat("\x01", 700), Holder: "h", Fence: 1},
		{Resource: strings.Repeat("r", leasefence.MaxIDLen), Holder: strings.Repeat("h", leasefence.MaxIDLen), Fence: ^leasefence.Fence(0)},
		{Resource: strings.Repeat("é", leasefence.MaxIDLen/2), Holder: strings.Repeat(">", 400), Fence: 7},
	} {
		p, err := s.Prove(tok)
		if err != nil {
			if !errors.Is(err, fencetoken.ErrUnsignable) {
				t.Errorf("Prove(%.40v...) = %v, want ErrUnsignable", tok, err)
			}
			continue
		}
		if got, err := v.Verify(p); err != nil || got != tok {
			t.Errorf("Prove signed %.40v... (%d bytes) but Verify = %v, %v", tok, len(p), got, err)
		}
	}
	if n := v.Refused(); n != 0 {
		t.Fatalf("Refused = %d for proofs the signer made", n)
	}
	// The bound is exact: the longest ASCII ids fit.
	if _, err := s.Prove(leasefence.Token{Resource: strings.Repeat("r", leasefence.MaxIDLen), Holder: strings.Repeat("h", leasefence.MaxIDLen), Fence: 1}); err != nil {
		t.Fatalf("Prove of the longest plain ids: %v", err)
	}
}

// The grant of a holder whose proof Prove refuses fails with ErrUnsignable
// and grants nothing: the resource is free for the next holder, whose
// proof verifies.
func TestGrantFailsWhenUnsignable(t *testing.T) {
	k := newKey(t)
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: leasefence.NewMonotonicClock("coordinator"), TTL: time.Minute, Prover: newSigner(t, k, "k1", issuer),
	})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("<", leasefence.MaxIDLen)
	out, err := coord.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: long, Resource: "r"})
	if !errors.Is(err, fencetoken.ErrUnsignable) || out.OK {
		t.Fatalf("Acquire by a holder of %d '<' = %+v, %v; want ErrUnsignable", len(long), out, err)
	}
	out, err = coord.Acquire(leasefence.AcquireRequest{RequestID: "2", Holder: "agent-a", Resource: "r"})
	if err != nil || !out.OK {
		t.Fatalf("the next holder's Acquire = %+v, %v; want granted (nothing was held)", out, err)
	}
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	if got, err := v.Verify(out.Grant.Proof); err != nil || got != out.Grant.Token {
		t.Fatalf("its proof: %v, %v", got, err)
	}
}

// A proof is one string: a line break (which Go's base64 decoder would
// skip), a space or padding anywhere in it is refused before decoding, and
// counted.
func TestVerifyRefusesAlteredEncodings(t *testing.T) {
	k := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	p := prove(t, newSigner(t, k, "k1", issuer), testToken)
	altered := alteredForms(p)
	for name, a := range altered {
		if got, err := v.Verify(a); !errors.Is(err, fencetoken.ErrInvalid) {
			t.Errorf("%s: Verify = %v, %v, want ErrInvalid", name, got, err)
		}
	}
	if n := v.Refused(); n != uint64(len(altered)) {
		t.Fatalf("Refused = %d after %d altered proofs", n, len(altered))
	}
	if got, err := v.Verify(p); err != nil || got != testToken {
		t.Fatalf("the proof itself: %v, %v", got, err)
	}
}

// alteredForms are p with one character the base64url alphabet lacks put
// where a lenient decoder would not notice it.
func alteredForms(p string) map[string]string {
	sig := strings.LastIndexByte(p, '.') + 1
	return map[string]string{
		"LF inside the signature":   p[:sig+5] + "\n" + p[sig+5:],
		"CRLF inside the signature": p[:sig+5] + "\r\n" + p[sig+5:],
		"LF after the signature":    p + "\n",
		"CRLF after the signature":  p + "\r\n",
		"CR inside the payload":     p[:20] + "\r" + p[20:],
		"space after the signature": p + " ",
		"padding":                   p + "==",
		"standard base64 character": p[:sig] + stdChar(p[sig]) + p[sig+1:],
	}
}

// stdChar is a character of the standard base64 alphabet that a lenient
// decoder reading it as base64url would decode to another value than c:
// '+' and '/' stand for '-' and '_' there.
func stdChar(c byte) string {
	if c == '-' {
		return "/"
	}
	return "+"
}

// Prove applies the one id rule: ids that are not valid UTF-8, empty or
// too long are refused (they would be rewritten to U+FFFD, making two
// holders' proofs interchangeable).
func TestProveValidatesIDs(t *testing.T) {
	s := newSigner(t, newKey(t), "k1", issuer)
	for _, tok := range []leasefence.Token{
		{Resource: "db\xff", Holder: "h", Fence: 1},
		{Resource: "r", Holder: "db\xfe", Fence: 1},
		{Resource: "r", Holder: strings.Repeat("h", leasefence.MaxIDLen+1), Fence: 1},
		{Resource: "", Holder: "h", Fence: 1},
		{Resource: "r", Holder: "h", Fence: 0},
	} {
		p, err := s.Prove(tok)
		var idErr *leasefence.IDError
		if err == nil || !errors.Is(err, leasefence.ErrInvalidRequest) || !errors.Is(err, fencetoken.ErrUnsignable) {
			t.Errorf("Prove(%.60q) = %.60q, %v; want ErrInvalidRequest and ErrUnsignable", tok, p, err)
		} else if tok.Fence != 0 && !errors.As(err, &idErr) {
			t.Errorf("Prove(%.60q) = %v, want an *IDError", tok, err)
		}
	}
}

// Claim keys are exact: a payload whose keys differ only in case, or that
// repeats one, is refused, so every verifier (Go, jose, PyJWT) reads the
// same fence or none.
func TestVerifyRefusesAmbiguousClaims(t *testing.T) {
	k := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	const good = `"iss":"` + issuer + `","sub":"agent-a","lf_res":"deploy/prod","lf_fence":"42"`
	for _, payload := range []string{"{" + good + "}", "{" + good + `,"o":{"sub":1,"SUB":[":",{"a\":":2}]},"k":"\"x\":"}`} {
		if got, err := v.Verify(signRaw(k.priv, "k1", payload)); err != nil || got != testToken {
			t.Fatalf("the unambiguous payload %s: %v, %v", payload, got, err)
		}
	}
	refused := map[string]string{
		"case variant of lf_fence":   `{` + good + `,"LF_FENCE":"99"}`,
		"case variant first":         `{"Lf_Fence":"99",` + good + `}`,
		"duplicate lf_fence":         `{` + good + `,"lf_fence":"99"}`,
		"duplicate sub":              `{` + good + `,"sub":"agent-b"}`,
		"case variant of sub alone":  `{"iss":"` + issuer + `","SUB":"agent-a","lf_res":"deploy/prod","lf_fence":"42"}`,
		"case variant of iss":        `{` + good + `,"ISS":"elsewhere"}`,
		"duplicate unknown claim":    `{` + good + `,"x":1,"x":2}`,
		"case variant unknown":       `{` + good + `,"x":1,"X":2}`,
		"long s folds to sub":        `{` + good + `,"ſub":"agent-b"}`,
		"escaped duplicate":          `{` + good + `,"\u006cf_fence":"99"}`,
		"duplicate beside nested ::": `{` + good + `,"o":{"a":1,"b":[{"c":":"}]},"o":2}`,
	}
	for name, payload := range refused {
		if got, err := v.Verify(signRaw(k.priv, "k1", payload)); !errors.Is(err, fencetoken.ErrInvalid) {
			t.Errorf("%s: Verify = %v, %v, want ErrInvalid", name, got, err)
		}
	}
	if n := v.Refused(); n != uint64(len(refused)) {
		t.Fatalf("Refused = %d after %d ambiguous payloads", n, len(refused))
	}
}

// VerifyOne takes exactly one proof: none or several (the genuine one
// twice included) are refused as invalid and counted.
func TestVerifyOne(t *testing.T) {
	k := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	p := prove(t, newSigner(t, k, "k1", issuer), testToken)
	if got, err := v.VerifyOne([]string{p}); err != nil || got != testToken {
		t.Fatalf("VerifyOne of one genuine proof = %v, %v", got, err)
	}
	for _, proofs := range [][]string{nil, {p, p}, {p, "x"}, {"", ""}} {
		if got, err := v.VerifyOne(proofs); !errors.Is(err, fencetoken.ErrInvalid) {
			t.Errorf("VerifyOne(%d proofs) = %v, %v, want ErrInvalid", len(proofs), got, err)
		}
	}
	if n := v.Refused(); n != 4 {
		t.Fatalf("Refused = %d after 4 refusals", n)
	}
}
