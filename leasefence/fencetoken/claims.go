package fencetoken

import (
	"encoding/json"

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

// The jwt.Claims methods. No proof has exp, nbf or aud: the parser's time
// checks find nothing to check, which is the point (see the package doc).

func (c signedClaims) GetIssuer() (string, error)                    { return c.Issuer, nil }
func (c signedClaims) GetSubject() (string, error)                   { return c.Subject, nil }
func (signedClaims) GetExpirationTime() (*jwt.NumericDate, error)    { return nil, nil }
func (signedClaims) GetNotBefore() (*jwt.NumericDate, error)         { return nil, nil }
func (signedClaims) GetIssuedAt() (*jwt.NumericDate, error)          { return nil, nil }
func (signedClaims) GetAudience() (jwt.ClaimStrings, error)          { return nil, nil }
func (c *receivedClaims) GetIssuer() (string, error)                 { return c.Issuer, nil }
func (c *receivedClaims) GetSubject() (string, error)                { return c.Subject, nil }
func (*receivedClaims) GetExpirationTime() (*jwt.NumericDate, error) { return nil, nil }
func (*receivedClaims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (*receivedClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil }
func (*receivedClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }
