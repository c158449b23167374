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
	"github.com/leasefence/lab/leasefence/leasetest"
)

// signRaw signs payload, a JSON text given byte for byte, under an EdDSA
// header naming kid: what a signer that wrote its own JSON would produce.
func signRaw(priv ed25519.PrivateKey, kid, payload string) string {
	enc := base64.RawURLEncoding
	input := enc.EncodeToString([]byte(`{"alg":"EdDSA","kid":"`+kid+`","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	return input + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(input)))
}

// widestIDs are valid ids of MaxIDLen bytes (or one less) made of what
// JSON writes widest, one kind each: every byte of a valid id takes at most
// two bytes in a proof's JSON.
func widestIDs() map[string]string {
	n := leasefence.MaxIDLen
	return map[string]string{
		`'"'`:             strings.Repeat(`"`, n),
		`'\'`:             strings.Repeat(`\`, n),
		"'<'":             strings.Repeat("<", n),
		"'&'":             strings.Repeat("&", n),
		"'>'":             strings.Repeat(">", n),
		"U+2028":          strings.Repeat("\u2028", n/3),
		"U+2029 and '\"'": strings.Repeat("\u2029\"", n/4),
		"'é'":             leasetest.LongestID(),
		"'😀'":             strings.Repeat("😀", n/4),
		"ASCII letters":   strings.Repeat("h", n),
		"U+FFFD":          strings.Repeat("\ufffd", n/3),
	}
}

// Every token with valid ids is signed, within MaxProofLength, and its
// proof verifies as that token: a holder of 1,024 '<' included, which
// JSON with HTML escaping writes in 6,144 bytes.
func TestProveSignsEveryValidToken(t *testing.T) {
	k := newKey(t)
	s := newSigner(t, k, "k1", issuer)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	ids := widestIDs()
	for holderKind, holder := range ids {
		for resourceKind, resource := range ids {
			tok := leasefence.Token{Resource: resource, Holder: holder, Fence: ^leasefence.Fence(0)}
			if err := leasefence.ValidateToken(tok); err != nil {
				t.Fatalf("the test's ids are not valid: %v", err)
			}
			p, err := s.Prove(tok)
			if err != nil {
				t.Errorf("Prove(holder of %s, resource of %s) = %v", holderKind, resourceKind, err)
				continue
			}
			if len(p) > fencetoken.MaxProofLength {
				t.Errorf("holder of %s, resource of %s: a proof of %d bytes, more than MaxProofLength (%d)", holderKind, resourceKind, len(p), fencetoken.MaxProofLength)
			}
			if got, err := v.Verify(p); err != nil || got != tok {
				t.Errorf("holder of %s, resource of %s: Prove signed it (%d bytes) but Verify = %.40v..., %v", holderKind, resourceKind, len(p), got, err)
			}
		}
	}
	if n := v.Refused(); n != 0 {
		t.Fatalf("Refused = %d for proofs the signer made", n)
	}
}

// NewSigner refuses a key id and issuer so long that the proof of the
// longest valid ids would not fit MaxProofLength, and takes ones that
// leave it room: what it takes, it signs every valid token with.
func TestNewSignerRefusesWhatLeavesNoRoom(t *testing.T) {
	k := newKey(t)
	for _, tc := range []struct {
		kid, iss string
		ok       bool
	}{
		{"k1", strings.Repeat("i", 200), true},
		{strings.Repeat("k", 50), strings.Repeat(`"`, 100), true},
		{"k1", strings.Repeat("i", fencetoken.MaxProofLength), false},
		{strings.Repeat("<", 400), issuer, false},
	} {
		s, err := fencetoken.NewSigner(k.priv, tc.kid, tc.iss)
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), "MaxProofLength") {
				t.Errorf("NewSigner(key id of %d bytes, issuer of %d bytes) = %v, want a refusal naming MaxProofLength", len(tc.kid), len(tc.iss), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewSigner(key id of %d bytes, issuer of %d bytes) = %v", len(tc.kid), len(tc.iss), err)
			continue
		}
		v, err := fencetoken.NewVerifier(tc.iss, map[string]ed25519.PublicKey{tc.kid: k.pub})
		if err != nil {
			t.Fatal(err)
		}
		widest := strings.Repeat(`"`, leasefence.MaxIDLen)
		tok := leasefence.Token{Resource: widest, Holder: widest, Fence: ^leasefence.Fence(0)}
		p := prove(t, s, tok)
		if got, err := v.Verify(p); err != nil || got != tok {
			t.Errorf("key id of %d bytes, issuer of %d bytes: the widest ids' proof (%d bytes): Verify = %.40v..., %v", len(tc.kid), len(tc.iss), len(p), got, err)
		}
	}
}

// A grant needs its proof: a holder of 1,024 '<' is granted, and its proof
// verifies at the resource.
func TestGrantOfTheWidestHolderVerifies(t *testing.T) {
	k := newKey(t)
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: leasefence.NewMonotonicClock("coordinator"), TTL: time.Minute, Prover: newSigner(t, k, "k1", issuer),
	})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("<", leasefence.MaxIDLen)
	out, err := coord.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: long, Resource: "r"})
	if err != nil || !out.OK {
		t.Fatalf("Acquire by a holder of %d '<' = %.80v, %v; want granted", len(long), out, err)
	}
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	if got, err := v.Verify(out.Grant.Proof); err != nil || got != out.Grant.Token {
		t.Fatalf("its proof (%d bytes): %.40v..., %v", len(out.Grant.Proof), got, err)
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

// Prove applies the one id rule: ids that are not valid UTF-8 (they would
// be rewritten to U+FFFD, making two holders' proofs interchangeable),
// empty, too long or with control characters (JSON writes one in six
// bytes) are refused.
func TestProveValidatesIDs(t *testing.T) {
	s := newSigner(t, newKey(t), "k1", issuer)
	for _, tok := range []leasefence.Token{
		{Resource: "db\xff", Holder: "h", Fence: 1},
		{Resource: "r", Holder: "db\xfe", Fence: 1},
		{Resource: strings.Repeat("\x01", 700), Holder: "h", Fence: 1},
		{Resource: "r", Holder: "agent-a\n", Fence: 1},
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
