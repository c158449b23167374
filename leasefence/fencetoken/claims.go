package fencetoken

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// signedClaims are the claims a Signer writes.
type signedClaims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Resource string `json:"lf_res"`
	Fence    string `json:"lf_fence"`
	IssuedAt int64  `json:"iat"`
}

// receivedClaims are the claims a Verifier reads: iat is not among them
// (it is informational), and the fence is kept raw so that a JSON number
// is refused rather than converted.
type receivedClaims struct {
	Issuer   string          `json:"iss"`
	Subject  string          `json:"sub"`
	Resource string          `json:"lf_res"`
	Fence    json.RawMessage `json:"lf_fence"`
}

// UnmarshalJSON reads the claims by their exact names. encoding/json
// matches keys without regard to case and keeps the last of repeated ones,
// while other JOSE libraries match exact keys: a signed payload with
// "lf_fence":"1" and "LF_FENCE":"99" would read as fence 99 here and 1
// there. So a payload that repeats a key, or has two keys that differ only
// in case (as encoding/json folds them), is refused, as is one that is not
// valid UTF-8: every verifier of a proof reads the same claims or refuses
// it.
func (c *receivedClaims) UnmarshalJSON(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("the claims are not valid UTF-8")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	if n := members(b); n != len(obj) {
		return fmt.Errorf("the claims have %d members but %d distinct keys: a key is repeated", n, len(obj))
	}
	folded := make(map[string]string, len(obj))
	for key := range obj {
		f := foldKey(key)
		if prev, ok := folded[f]; ok {
			return fmt.Errorf("claim keys %q and %q differ only in case", prev, key)
		}
		folded[f] = key
	}
	*c = receivedClaims{Fence: obj[ClaimFence]}
	for _, claim := range [...]struct {
		key string
		dst *string
	}{{"iss", &c.Issuer}, {"sub", &c.Subject}, {ClaimResource, &c.Resource}} {
		if raw, ok := obj[claim.key]; ok {
			if err := json.Unmarshal(raw, claim.dst); err != nil {
				return fmt.Errorf("claim %s is %s, not a string", claim.key, raw)
			}
		}
	}
	return nil
}

// members counts the members of the JSON object b, which json.Unmarshal
// has accepted: the colons outside strings at depth 1.
func members(b []byte) int {
	n, depth, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch ch := b[i]; {
		case inString && ch == '\\':
			i++ // the escaped byte
		case ch == '"':
			inString = !inString
		case inString:
		case ch == '{' || ch == '[':
			depth++
		case ch == '}' || ch == ']':
			depth--
		case ch == ':' && depth == 1:
			n++
		}
	}
	return n
}

// foldKey is key as encoding/json folds it to match a field name: ASCII
// letters upper-cased, any other rune r as unicode.ToUpper(unicode.ToLower(r))
// ("sub", "SUB" and "ſub" fold alike).
func foldKey(key string) string {
	var buf [32]byte
	out := buf[:0]
	for _, r := range key {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			out = append(out, byte(r))
			continue
		}
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
	}
	return string(out)
}

// The jwt.Claims methods. No proof has exp, nbf or aud: the parser's time
// checks find nothing to check, which is the point (see the package doc).

func (c *receivedClaims) GetIssuer() (string, error)                 { return c.Issuer, nil }
func (c *receivedClaims) GetSubject() (string, error)                { return c.Subject, nil }
func (*receivedClaims) GetExpirationTime() (*jwt.NumericDate, error) { return nil, nil }
func (*receivedClaims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (*receivedClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil }
func (*receivedClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }
